"""Geonode batch jobs of the incremental spider: each submitted, waited for, its
results read into items; a failure leaves its pages due. What a job needs is
named here (``BatchJobs``), not read off the spider."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy import stats
from increcrawl_scrapy.geonode.batch import NO_CONTENT, BatchJob, page_result
from increcrawl_scrapy.geonode.errors import (
    GeonodeError,
    GeonodeFatalError,
    GeonodeRetriesExhausted,
)
from increcrawl_scrapy.spiders.page_items import batch_item, tokens_of

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.geonode.client import GeonodeClient
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.spiders.page_content import PageContent
    from increcrawl_scrapy.spiders.tokens import TokenBudget

logger = logging.getLogger(__name__)


@dataclass
class BatchJobs:
    """One crawl's batch jobs: what they need, and those under way (cancelled
    when the crawl stops, so they charge no more)."""

    client: GeonodeClient
    config: IncrecrawlConfig
    formats: tuple[str, ...]
    content: PageContent  # a result's text, as a single extract's
    stats: StatsCollector | None
    #: Ends the crawl: (close reason, why); for an API that cannot be used.
    close: Callable[[str, str], None]
    active: set[BatchJob] = field(default_factory=set)

    async def run(
        self, pages: list[PageState], tokens: TokenBudget
    ) -> AsyncIterator[dict[str, Any]]:
        """One job for *pages*: their items; what they cost is answered to *tokens*."""
        config = self.config
        charged = 0  # tokens the job's results say they cost
        job = BatchJob(
            self.client,
            [page.url for page in pages],
            formats=list(self.formats),
            render_js=config.render_js,
            poll_interval=config.batch_poll_interval,
            timeout=config.batch_timeout,
        )
        try:
            await job.submit()
            self.active.add(job)
            status = await job.wait()
            self.active.discard(job)  # finished or cancelled
            if status == "failed":
                logger.warning("Batch job %s failed: its completed pages are kept", job.job_id)
                stats.inc(self.stats, stats.BATCH_FAILED)
            if status not in ("completed", "failed"):
                return
            async for index, result in job.results():
                charged += tokens_of(result)
                fields = page_result(result)
                if fields is None:  # a result the job never finished stays due
                    continue
                if fields.get("error_kind") == NO_CONTENT:
                    stats.inc(self.stats, stats.API_NO_CONTENT)
                    logger.warning(
                        "Batch result for %s: %s; it stays due", result.get("url"), fields["error"]
                    )
                yield await self.content.with_text(batch_item(pages[index], result, fields))
        except GeonodeFatalError as exc:
            self.close(exc.reason, str(exc))
        except GeonodeError as exc:
            logger.warning("Batch of %d pages failed: %s; they stay due", len(pages), exc)
            stats.inc(self.stats, stats.BATCH_ERRORS)
            if isinstance(exc, GeonodeRetriesExhausted) and not exc.site_failure:
                # The API's own failure: one for each page it carried, as single extracts
                # would have counted (the breaker ends the run if the API stays down).
                self.client.breaker.failed(len(pages))
        finally:
            tokens.answer(len(pages), charged)

    async def cancel_all(self) -> None:
        for job in list(self.active):
            # The crawl stops while a job runs: stop it too, so it charges no more.
            try:
                await job.cancel()
                logger.info("Batch job %s cancelled at shutdown; its pages stay due", job.job_id)
                stats.inc(self.stats, stats.BATCH_CANCELLED)
            except GeonodeError as exc:
                logger.warning("Could not cancel batch job %s at shutdown: %s", job.job_id, exc)
        self.active.clear()
