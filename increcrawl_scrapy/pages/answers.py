"""Whether every page a run asked for answered usably: a run that went idle is
*complete* (``pages/moved.py``: it may deliver the gone items earlier runs held)
only if so. A page that answered 5xx (or 429, 403: any error but a page's gone
answer, 404 or 410), whose download failed or was retried out, or whose response
raised in the spider was not seen: an item held gone may live on it.

Counted a page at a time, by URL (Scrapy's stats count exceptions, not pages): a
request that reached the downloader waits for its answer (a retry of it answers it
too), one that never came failed; an answer that is not usable, or a spider error on
it, fails its page until a usable answer of it comes. The answers are those the
downloader got (``response_downloaded``), before its middlewares: a 304 the crawl
takes as the page unchanged (``skip_not_due.py``) never reaches the engine. A page
the downloader never asked for (a cache's answer, the Geonode API's) is not counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.http.request import NO_CALLBACK

from increcrawl_scrapy.schedule.rows import GONE_STATUSES

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
        self.waiting: set[str] = set()  # reached the downloader, no answer yet
        self.failed: set[str] = set()  # answered, not usably (or raised in the spider)
        self.overflow = False
        connect = crawler.signals.connect
        connect(self._asked, signal=signals.request_reached_downloader)
        connect(self._answered, signal=signals.response_downloaded)
        connect(self._raised, signal=signals.spider_error)

    def complete(self) -> bool:
        """Every page asked answered usably (so far: at idle, the run's whole)."""
        return not self.waiting and not self.failed and not self.overflow

    def _add(self, urls: set[str], url: str) -> None:
        if len(urls) < MAX_PAGES:
            urls.add(url)
        else:
            self.overflow = True

    def _counted(self, request: Request) -> bool:
        # robots.txt (no callback) and the crawl's own data: request are no pages.
        return request.callback is not NO_CALLBACK and not request.meta.get(self.ignored)

    def _asked(self, request: Request, **_: Any) -> None:
        if self._counted(request):
            self._add(self.waiting, request.url)

    def _answered(self, response: Response, request: Request, **_: Any) -> None:
        if not self._counted(request):
            return
        self.waiting.discard(request.url)
        if usable(response.status):  # a redirect: its target is asked in turn
            self.failed.discard(request.url)
        else:
            self._add(self.failed, request.url)

    def _raised(self, failure: Failure, response: Response, **_: Any) -> None:
        request = getattr(response, "request", None)
        if request is None or self._counted(request):
            self._add(self.failed, response.url)
