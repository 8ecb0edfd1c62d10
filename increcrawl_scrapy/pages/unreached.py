"""Pages a project's crawl no longer reaches: a page deleted from a link-crawled site
takes its links with it, so no request for it is made again and its 404 is never
seen. A page with state that the seed's last ``INCRECRAWL_UNREACHED_RUNS`` runs did
not reach (due since the first of them, fetched by none) is requested directly once
the crawl is idle: its 404 or 410 makes it gone (``pages/gone.py``: its items are
delivered ``gone``), and a page that still answers is recorded as seen, its content
not compared (no page of the site leads to it: its callback is not known), so it is
asked again only after its next interval. ``scrapy increcrawl status`` names them."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: The meta key of a direct check's request.
UNREACHED = "increcrawl_unreached"
#: Pages checked directly in one run, at most.
MAX_CHECKS = 1_000


class UnreachedPages:
    """Once a crawl, when it is idle: the pages its last runs did not reach."""

    def __init__(self, crawler: Crawler, runs: int) -> None:
        self.crawler = crawler
        self.runs = runs
        self.asked = False
        self.checking = False  # its query running: the state must stay open
        crawler.signals.connect(self.idle, signal=signals.spider_idle)

    def idle(self) -> None:
        if self.crawler.engine is None:
            return
        if not self.asked:
            self.asked = self.checking = True
            deferred_from_coro(self._check())
        if self.checking:  # another look meanwhile (a held item's release) waits too
            raise DontCloseSpider  # the next idle, once the checks are in, ends the crawl

    async def _check(self) -> None:
        try:
            await self._request_unreached()
        finally:
            self.checking = False
            compat.wake_engine(self.crawler)  # whatever it found: not at the heartbeat

    async def _request_unreached(self) -> None:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return
        urls = await compat.in_thread(state.store.unreached, state.seed, self.runs, MAX_CHECKS)
        if not urls or self.crawler.engine is None:
            return
        logger.info(
            "%d pages with state were not reached by the last %d runs (no page links to "
            "them any more): requested directly, a 404 or 410 makes them gone",
            len(urls),
            self.runs,
        )
        for url in urls:
            meta = {UNREACHED: True, "increcrawl_always": True, "dont_cache": True}
            self.crawler.engine.crawl(Request(url, callback=answered, meta=meta, dont_filter=True))
        stats.inc(self.crawler.stats, stats.UNREACHED_CHECKED, len(urls))


def answered(response: Response) -> list[Any]:
    """A direct check that answered: ``PageItemsMiddleware`` records it as seen."""
    return []


async def seen(crawler: Crawler, response: Response) -> None:
    """A directly checked page that answered: seen, unchanged as far as its state
    can tell (its content not compared), its next check after its interval."""
    try:
        state = crawl_state(crawler)
        key = state.store.normalize(response.url)
    except (StateLockedError, ValueError):
        return
    if state.store.shared and not state.store.known(key):
        await compat.in_thread(state.store.load, [key])
    state.store.record(response.url, 304, seed=state.seed, key=key)
    stats.inc(crawler.stats, stats.UNCHANGED)
