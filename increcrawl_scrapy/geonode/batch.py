"""Geonode batch jobs: submit, poll without blocking, page through results, cancel.

The spider decides which pages go in a job and what to do with each result; this
module speaks the protocol (as Scrapy's ``SitemapSpider`` leaves XML to
``utils/sitemap.py``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy import stats
from increcrawl_scrapy.geonode.errors import is_site_error_code, origin_status_of

if TYPE_CHECKING:
    from increcrawl_scrapy.geonode.client import GeonodeClient

logger = logging.getLogger(__name__)

MAX_URLS = 1000  # the API's limit per job
PAGE_SIZE = 50  # results per status page, the API's maximum
TERMINAL = ("completed", "failed", "cancelled")
#: The ``error_kind`` of a result for an origin 200 without content.
NO_CONTENT = "API no content"


class BatchJob:
    """One ``POST /v1/batch`` job of *urls*; results come back by ``input_index``."""

    def __init__(
        self,
        client: GeonodeClient,
        urls: list[str],
        *,
        formats: list[str],
        render_js: bool,
        poll_interval: float,
        timeout: float,
    ) -> None:
        self.client = client
        self.urls = urls
        self.body = {"urls": urls, "formats": formats, "render_js": render_js}
        self.poll_interval = poll_interval
        self.timeout = timeout
        self.job_id: str | None = None
        self.reserved = 0  # tokens reserved for the job until its results are read

    async def submit(self) -> str:
        self.reserved = await self.client.reserve(len(self.urls))
        try:
            self.job_id = str((await self.client.submit_batch(self.body))["job_id"])
        except BaseException:
            self._settle(0)  # no job: nothing charged
            raise
        return self.job_id

    def _settle(self, charged: int) -> None:
        """What the job charged is known: its reservation is settled. A job
        cancelled or lost before its results were read keeps its reservation."""
        self.client.settle(self.reserved, len(self.urls), charged)
        self.reserved = 0

    async def wait(self) -> str | None:
        """The job's final status, polled every *poll_interval* seconds without
        blocking; None if it outlasted *timeout* (it is then cancelled)."""
        assert self.job_id is not None
        deadline = time.monotonic() + self.timeout
        while True:
            await asyncio.sleep(self.poll_interval)
            status = (await self.client.batch_status(self.job_id, 1, 1))["status"]
            if status in TERMINAL:
                return str(status)
            if time.monotonic() > deadline:
                logger.warning(
                    "Batch job %s still %s after GEONODE_BATCH_TIMEOUT=%gs: "
                    "cancelled, its pages stay due",
                    self.job_id,
                    status,
                    self.timeout,
                )
                stats.inc(self.client.stats, stats.BATCH_TIMEOUTS)
                await self.cancel()
                return None

    async def cancel(self) -> None:
        assert self.job_id is not None
        await self.client.cancel_batch(self.job_id)

    async def results(self) -> AsyncIterator[tuple[int, dict[str, Any]]]:
        """``(input_index, result)`` for every result the job returns, each once;
        malformed, repeated and missing results are counted."""
        assert self.job_id is not None
        page, seen = 1, set()
        while True:
            answer = await self.client.batch_status(self.job_id, page, PAGE_SIZE)
            if page == 1:
                tokens = _mapping(answer.get("token_summary")).get("tokens_charged_total")
                if isinstance(tokens, int) and tokens > 0:
                    stats.inc(self.client.stats, stats.API_TOKENS, tokens)
                self._settle(tokens if isinstance(tokens, int) else 0)
            results = answer.get("results") or []
            for result in results:
                index = result.get("input_index") if isinstance(result, dict) else None
                if not isinstance(index, int) or not _is_index(index, len(self.urls)):
                    stats.inc(self.client.stats, stats.BATCH_BAD_RESULTS)
                    continue
                if index in seen:
                    stats.inc(self.client.stats, stats.BATCH_REPEATED_RESULTS)
                    continue
                seen.add(index)
                yield index, result
            if len(results) < PAGE_SIZE:
                break
            page += 1
        total = answer.get("total_urls")
        if isinstance(total, int) and len(seen) < total:
            # Result pages that skipped items: those pages were not fetched for us.
            logger.warning(
                "Batch job %s returned %d of its %d results", self.job_id, len(seen), total
            )
            stats.inc(self.client.stats, stats.BATCH_MISSING_RESULTS, total - len(seen))


def page_result(result: dict[str, Any]) -> dict[str, Any] | None:
    """What a batch result says of its page, as item fields (``http_status``,
    ``markdown``, or ``error`` and ``site_failure``); None while not terminal."""
    if result.get("status") in ("queued", "processing", "pending", "cancelled"):
        return None  # still running (or cancelled) when the job ended: stays due
    metadata = _mapping(result.get("metadata"))
    status = metadata.get("http_status")
    if result.get("status") == "failed":
        status = origin_status_of(result.get("error_code"), result.get("error_message"))
    if not isinstance(status, int) or isinstance(status, bool):
        code = result.get("error_code")
        return {
            "http_status": 0,
            "error": code or "no status",
            "error_kind": f"API {code}" if code else "no status",
            "site_failure": is_site_error_code(code),
        }
    data = _mapping(result.get("data")) if status == 200 else {}
    markdown, html = data.get("markdown"), data.get("html")
    if status == 200 and not isinstance(markdown, str) and not isinstance(html, str):
        # Without content a 200 would be recorded as an empty page: an error, kept due.
        return {
            "http_status": 0,
            "error": "origin 200, but no content in the result",
            "error_kind": NO_CONTENT,
            "site_failure": False,
        }
    return {
        "http_status": status,
        "markdown": markdown if isinstance(markdown, str) else None,
        # The page's HTML when asked for: the spider takes its text from it.
        "html": html if isinstance(html, str) else None,
        "etag": None,
        "last_modified": None,
    }


def _is_index(value: Any, count: int) -> bool:
    # input_index must be a position in the job's URLs (bool is an int to Python).
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}
