"""The add-on's own signals: a page fetched where Scrapy's downloader does not see it.

A downloader middleware that answers a request itself with what the page's origin
answered (``GeonodeExtractMiddleware``: the Geonode API fetched it) never lets the
request reach the downloader, so Scrapy sends neither ``request_reached_downloader``
nor ``response_downloaded`` for it. It sends these in their place, so that a run
knows which pages it asked and what their origins answered (``pages/answers.py``:
a run in which one failed did not see every page). A cache's answer is no fetch:
never sent for it. Sent with ``crawler.signals.send_catch_log``.
"""

from __future__ import annotations

#: A page's request goes to its origin (args: ``request``, ``spider``). One sent
#: without ``origin_answered`` after it is a fetch that failed (an API error).
origin_asked = object()
#: Its origin answered (args: ``response``, whose status is the origin's,
#: ``request``, ``spider``).
origin_answered = object()
