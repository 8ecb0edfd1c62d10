"""``SkipNotDueMiddleware``: in an existing project, do not fetch what is not due.

Opt-in (``INCRECRAWL_SKIP_NOT_DUE = True``, or a spider attribute
``increcrawl_skip_not_due = True``). A request whose URL has state and produced items
before is skipped while it is not due (``increcrawl/skipped/not_due``); when it is
due it carries the stored validators (``If-None-Match`` / ``If-Modified-Since``), and
a 304 is recorded as unchanged without calling the spider. Pages that produced only
requests (listings, pagination) have no state, so they are always fetched and new
items are still found. ``request.meta["increcrawl_always"] = True`` opts a request
out; ``-a increcrawl_reset=1`` makes every page of the spider due again.

The ``incremental`` spider queues only due pages itself: this middleware leaves it
alone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import IncrecrawlConfig
from increcrawl_scrapy.shared_state import CrawlState, crawl_state
from increcrawl_scrapy.spiders.page_items import conditions, header_of
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: Before RobotsTxtMiddleware (100): a page not due costs nothing at all.
PRIORITY = 90
META_ALWAYS = "increcrawl_always"
_META_KEY = "increcrawl_conditional"  # the row a conditional request was sent for
NOT_DUE, NOT_MODIFIED = "not_due", "not_modified"
VALIDATORS_KEPT = 10_000


class SkipNotDueMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SkipNotDueMiddleware:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = IncrecrawlConfig.from_settings(crawler.settings)

    def _active(self) -> bool:
        spider = self.crawler.spider
        if spider is None or hasattr(spider, "increcrawl_scope"):
            return False  # the incremental spider has its own queue
        return bool(getattr(spider, "increcrawl_skip_not_due", self.config.skip_not_due))

    def process_request(self, request: Request, spider: Spider | None = None) -> Any:
        if not self._active() or request.meta.get(META_ALWAYS):
            return None
        state = self._state()
        if state is None:
            return None
        if state.store.shared:
            try:
                key = state.store.normalize(request.url)
            except ValueError:
                return None  # not a page URL
            if not state.store.known(key):  # read off the reactor's thread first
                return self._after_loading(request, state, key)
        return self._decide(request, state)

    async def _after_loading(self, request: Request, state: CrawlState, key: str) -> None:
        await compat.in_thread(state.store.load, [key])
        self._decide(request, state)

    def _decide(self, request: Request, state: CrawlState) -> None:
        try:
            page = state.store.get(request.url)
        except ValueError:
            return  # not a page URL
        if page is None or not page.fetch_count:
            return  # never produced items: a listing, or a new page
        if page.next_check > self.config.clock():
            stats.inc(self.crawler.stats, stats.SKIPPED, reason=NOT_DUE)
            raise IgnoreRequest(f"not due before {page.next_check:.0f} (increcrawl)")
        headers = conditions(page)
        if headers:
            for name, value in headers.items():
                request.headers.setdefault(name, value)
            request.meta[_META_KEY] = page.normalized_url

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        key = request.meta.get(_META_KEY)
        state = self._state() if key or self._active() else None
        if state is None:
            return response
        if key and response.status == 304:
            state.store.record(request.url, 304, seed=state.seed, key=key)
            stats.inc(self.crawler.stats, stats.UNCHANGED)
            stats.inc(self.crawler.stats, stats.SKIPPED, reason=NOT_MODIFIED)
            raise IgnoreRequest("not modified since the last fetch (increcrawl)")
        if response.status == 200:
            etag, modified = header_of(response, "ETag"), header_of(response, "Last-Modified")
            if etag or modified:
                # For the pipeline: the validators of the page its items come from
                # (taken when they are recorded; a bounded number kept meanwhile).
                if len(state.validators) >= VALIDATORS_KEPT:
                    del state.validators[next(iter(state.validators))]
                state.validators[response.url] = (etag, modified)
        return response

    def _state(self) -> CrawlState | None:
        """The crawl's state; None while another crawl holds the database (the crawl
        is closing: logged once by ``crawl_state``)."""
        try:
            return crawl_state(self.crawler)
        except StateLockedError:
            return None
