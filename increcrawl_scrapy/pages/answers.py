"""Whether every page a run asked for answered usably: a run that went idle is
*complete* (``pages/moved.py``: it may deliver the gone items earlier runs held)
only if so. A page that answered 5xx (or 429, 403: any error but a page's gone
answer, 404 or 410), whose download failed or was retried out, or whose response
raised in the spider was not seen: an item held gone may live on it.

Counted a request at a time, by its fingerprint (Scrapy's stats count exceptions,
not pages; postbacks share one URL, each page a form of its own): a request that
reached the downloader waits for its answer (a retry of it, the same fingerprint,
answers it too), one that never came failed; an answer that is not usable, or a
spider error on it, fails it until a usable answer of the same request comes (a
redirect's target is a request of its own). The answers are those the
downloader got (``response_downloaded``), before its middlewares: a 304 the crawl
takes as the page unchanged (``skip_not_due.py``) never reaches the engine. A page a
downloader middleware fetched itself (the Geonode API's) is counted by the signals
it sends in their place (``increcrawl_scrapy/signals.py``), with its origin's status;
a cache's answer is no fetch, not counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.http.request import NO_CALLBACK

from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.signals import origin_answered, origin_asked

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

#: Kept of each set, at most: past that, the run is not complete.
MAX_PAGES = 10_000


def usable(status: int) -> bool:
    """An answer that says what the page is: its content, unchanged (304), a
    redirect, or gone (404, 410)."""
    return status < 400 or status in GONE_STATUSES


class Answers:
    """One run's pages asked and not (yet) answered usably."""

    def __init__(self, crawler: Crawler, *, ignored: str) -> None:
        self.ignored = ignored  # the meta key of the crawl's own requests (a release)
        self.fingerprint = crawler.request_fingerprinter.fingerprint
        #: By fingerprint, their URLs (for the log):
        self.waiting: dict[bytes, str] = {}  # reached the downloader, no answer yet
        self.failed: dict[bytes, str] = {}  # answered, not usably (or raised in the spider)
        self.overflow = False
        connect = crawler.signals.connect
        connect(self._asked, signal=signals.request_reached_downloader)
        connect(self._answered, signal=signals.response_downloaded)
        connect(self._asked, signal=origin_asked)  # a page a middleware fetched itself
        connect(self._answered, signal=origin_answered)
        connect(self._raised, signal=signals.spider_error)

    def complete(self) -> bool:
        """Every page asked answered usably (so far: at idle, the run's whole)."""
        return not self.waiting and not self.failed and not self.overflow

    def not_answered(self) -> list[str]:
        """The URLs of the requests not answered usably (yet)."""
        return sorted({**self.waiting, **self.failed}.values())

    def _add(self, requests: dict[bytes, str], request: Request) -> None:
        if len(requests) < MAX_PAGES:
            requests[self.fingerprint(request)] = request.url
        else:
            self.overflow = True

    def _counted(self, request: Request) -> bool:
        # robots.txt (no callback) and the crawl's own data: request are no pages.
        return request.callback is not NO_CALLBACK and not request.meta.get(self.ignored)

    def _asked(self, request: Request, **_: Any) -> None:
        if self._counted(request):
            self._add(self.waiting, request)

    def _answered(self, response: Response, request: Request, **_: Any) -> None:
        if not self._counted(request):
            return
        self.waiting.pop(self.fingerprint(request), None)
        if usable(response.status):  # a redirect: its target is asked in turn
            self.failed.pop(self.fingerprint(request), None)
        else:
            self._add(self.failed, request)

    def _raised(self, failure: Failure, response: Response, **_: Any) -> None:
        request = getattr(response, "request", None)
        if request is None:  # no request to fingerprint: its URL stands for it
            self.failed[response.url.encode()] = response.url
        elif self._counted(request):
            self._add(self.failed, request)
