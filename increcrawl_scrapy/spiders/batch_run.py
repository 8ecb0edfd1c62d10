"""One Geonode batch job of the incremental spider: submitted, waited for, its
results read into items; a failure leaves its pages due."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

from increcrawl_scrapy import stats
from increcrawl_scrapy.geonode.batch import NO_CONTENT, BatchJob, page_result
from increcrawl_scrapy.geonode.errors import (
    GeonodeError,
    GeonodeFatalError,
    GeonodeRetriesExhausted,
)
from increcrawl_scrapy.geonode.payload import formats_for
from increcrawl_scrapy.spiders.page_items import batch_item, tokens_of

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.schedule.rows import PageState

logger = logging.getLogger(__name__)


class BatchSpider(Protocol):
    """What a batch job asks of the spider that runs it (``IncrementalSpider``,
    which imports this module: named by what it does, not by its class)."""

    crawler: Crawler
    config: IncrecrawlConfig
    _client: Any
    _active_jobs: set[Any]
    _content: Any
    _tokens: Any

    def _close(self, reason: str, message: str) -> None: ...


async def run_batch(spider: BatchSpider, pages: list[PageState]) -> AsyncIterator[dict[str, Any]]:
    client = spider._client
    assert client is not None
    config = spider.config
    charged = 0  # tokens the job's results say they cost
    job = BatchJob(
        client,
        [page.url for page in pages],
        formats=list(formats_for(config, spider)),
        render_js=config.render_js,
        poll_interval=config.batch_poll_interval,
        timeout=config.batch_timeout,
    )
    try:
        await job.submit()
        spider._active_jobs.add(job)
        status = await job.wait()
        spider._active_jobs.discard(job)  # finished or cancelled
        if status == "failed":
            logger.warning("Batch job %s failed: its completed pages are kept", job.job_id)
            stats.inc(spider.crawler.stats, stats.BATCH_FAILED)
        if status not in ("completed", "failed"):
            return
        async for index, result in job.results():
            charged += tokens_of(result)
            fields = page_result(result)
            if fields is None:  # a result the job never finished stays due
                continue
            if fields.get("error_kind") == NO_CONTENT:
                stats.inc(spider.crawler.stats, stats.API_NO_CONTENT)
                logger.warning(
                    "Batch result for %s: %s; it stays due", result.get("url"), fields["error"]
                )
            yield await spider._content.with_text(batch_item(pages[index], result, fields))
    except GeonodeFatalError as exc:
        spider._close(exc.reason, str(exc))
    except GeonodeError as exc:
        logger.warning("Batch of %d pages failed: %s; they stay due", len(pages), exc)
        stats.inc(spider.crawler.stats, stats.BATCH_ERRORS)
        if isinstance(exc, GeonodeRetriesExhausted) and not exc.site_failure:
            # The API's own failure: one for each page it carried, as single extracts
            # would have counted (the breaker ends the run if the API stays down).
            client.breaker.failed(len(pages))
    finally:
        spider._tokens.answer(len(pages), charged)
