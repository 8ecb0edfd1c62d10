"""A free direct probe first, a Geonode extraction when it says the page changed
(``INCRECRAWL_FETCHER = "hybrid"``): the steps are ``hybrid_fetch.py``'s, the
per-host verdicts ``host_fetchers.py``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.spiders.fetchers.geonode import GeonodeFetcher
from increcrawl_scrapy.spiders.hybrid_fetch import EXTRACT, PROBE, HybridFetch
from increcrawl_scrapy.spiders.page_items import page_item

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.http import Request, Response
    from twisted.python.failure import Failure

    from increcrawl_scrapy.crawl.shared_state import CrawlState
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.spiders.fetchers.base import Outputs


class HybridFetcher(GeonodeFetcher):
    kind = "hybrid"
    free_answers = True  # a probe that answers costs nothing
    how = "with a direct probe first and, when they changed, "
    hybrid: HybridFetch  # set by open()

    async def open(self, state: CrawlState) -> bool:
        inputs = self.inputs
        self.hybrid = HybridFetch(inputs.crawler, self.config, state.store, inputs.content)
        return await super().open(state)

    async def request(self, page: PageState) -> Request:
        await self.hybrid.before(page)  # its host's first probe answered first
        request = self.inputs.page_request(page)
        # A page for the subclass's callback is its items: Geonode's, not a probe's.
        return self.hybrid.request(page, request, probe=not self.inputs.ruled(page.url))

    def answered(self, response: Response, outputs: Outputs) -> AsyncIterator[Any]:
        step = HybridFetch.step(response.meta)
        if step is None:
            return outputs(response)
        if step == PROBE:
            return self.hybrid.probed(response, page_item, self.tokens)
        # An extraction after a probe: its host's scout is done now, whatever it said.
        return self.hybrid.finishing(response, outputs(response))

    async def item(self, response: Response, item: dict[str, Any]) -> dict[str, Any]:
        if HybridFetch.step(response.meta) == EXTRACT:
            return await self.hybrid.extracted(response, item)
        return item

    async def failed(self, failure: Failure) -> Request | None:
        if self.hybrid.takes(failure):
            return await self.hybrid.probe_failed(failure)  # no answer: Geonode is asked
        return None
