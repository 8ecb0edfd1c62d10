"""Pages fetched through the Geonode API: one ``POST /v1/extract`` per page (the
page's request, routed by ``GeonodeExtractMiddleware``), or, for the rows without
validators of a chunk large enough, ``POST /v1/batch`` jobs (``batch_run.py``)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.config import redact
from increcrawl_scrapy.crawl.validators import conditions
from increcrawl_scrapy.geonode.batch import MAX_URLS
from increcrawl_scrapy.geonode.client import client_for
from increcrawl_scrapy.geonode.errors import GeonodeFatalError
from increcrawl_scrapy.spiders import progress
from increcrawl_scrapy.spiders.batch_run import BatchJobs
from increcrawl_scrapy.spiders.fetchers.base import Fetcher, FetchInputs
from increcrawl_scrapy.spiders.skipping import robots_allowed
from increcrawl_scrapy.spiders.tokens import TokenBudget, month_share

if TYPE_CHECKING:
    from protego import Protego

    from increcrawl_scrapy.crawl.shared_state import CrawlState
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.schedule.token_plan import MonthShare
    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)


class GeonodeFetcher(Fetcher):
    """One extract per page: the spider's request, which the middleware routes."""

    kind = "geonode"
    #: How pages are asked, in the announcement (hybrid's says probes come first).
    how = ""

    def announce(self) -> None:
        logger.info(
            "Fetching pages %sthrough the Geonode API at %s (key %s)",
            self.how,
            self.config.api_url,
            redact(self.config.api_key),
        )

    async def open(self, state: CrawlState) -> bool:
        client = self.client = client_for(self.inputs.crawler)  # the middleware's too
        state.api_down = client.breaker.down
        try:
            await client.adopt_plan_concurrency()
        except GeonodeFatalError as exc:  # a bad key, a spent quota, no API there
            self.inputs.close(exc.reason, str(exc))
            return False
        return True

    async def month_share(self, store: StateStore) -> MonthShare | None:
        return await month_share(store, self.config, self.stats)

    def budget(self, share: MonthShare | None) -> TokenBudget:
        self.tokens = TokenBudget.for_run(
            self.config, share, self.stats, free_answers=self.free_answers
        )
        return self.tokens


class BatchGeonodeFetcher(GeonodeFetcher):
    """Extracts, and batch jobs for a chunk's rows without validators when there
    are ``GEONODE_BATCH_MIN_URLS`` of them (rows with validators go one by one:
    a batch job sends no conditional headers)."""

    kind = "batch"

    def __init__(self, inputs: FetchInputs) -> None:
        super().__init__(inputs)
        self.jobs: BatchJobs | None = None  # once the client is open
        self.robots: dict[str, Protego | None] = {}  # robots.txt per origin

    async def open(self, state: CrawlState) -> bool:
        opened = await super().open(state)
        assert self.client is not None
        inputs = self.inputs
        self.jobs = BatchJobs(
            self.client, self.config, inputs.formats, inputs.content, self.stats, inputs.close
        )
        return opened

    def split(self, due: list[PageState]) -> tuple[list[PageState], list[PageState]]:
        """(pages extracted one by one, pages for batch jobs)."""
        plain = [page for page in due if not conditions(page)]
        if len(plain) < self.config.batch_min_urls:
            return due, []
        return [page for page in due if conditions(page)], plain

    async def fetch(self, due: list[PageState]) -> AsyncIterator[Any]:
        singles, batched = self.split(due)
        if batched:
            crawler = self.inputs.crawler
            batched = await robots_allowed(
                batched, self.inputs.site_fetch, crawler.settings, self.stats, self.robots
            )
        async for request in super().fetch(singles):
            yield request
        if self.out_of_tokens:
            return
        assert self.jobs is not None
        for start in range(0, len(batched), MAX_URLS):
            batch = batched[start : start + MAX_URLS]
            fits = self.tokens.take(len(batch))
            self.inputs.progress.enter(progress.BATCH)
            if fits:
                async for item in self.jobs.run(batch[:fits], self.tokens):
                    yield item
            if fits < len(batch):
                self.out_of_tokens = True
                return
            self.inputs.progress.enter(progress.FETCHING)

    async def close(self) -> None:
        if self.jobs is not None:
            await self.jobs.cancel_all()
