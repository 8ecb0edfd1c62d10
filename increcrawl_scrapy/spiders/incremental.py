"""The ``incremental`` spider: discover, queue what is due, fetch it.

    scrapy crawl incremental -a sitemap_url=https://example.com/sitemap.xml -o changes.jsonl

The spider never fingerprints or decides anything about content: it yields one
item per fetched page (or per failure) and ``IncrementalStatePipeline`` records it.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse, Request, TextResponse
from scrapy.http.request import NO_CALLBACK
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from increcrawl_scrapy import compat
from increcrawl_scrapy.config import IncrecrawlConfig, redact
from increcrawl_scrapy.discovery import (
    Scope,
    SitemapError,
    SitemapStats,
    decompress,
    iter_sitemap,
    robots_sitemaps,
)
from increcrawl_scrapy.geonode.client import GeonodeClient
from increcrawl_scrapy.geonode.client import stat as geonode_stat
from increcrawl_scrapy.geonode.errors import GeonodeError, GeonodeFatalError, origin_status_of
from increcrawl_scrapy.markdown import html_to_markdown
from increcrawl_scrapy.shared_state import crawl_state
from increcrawl_scrapy.state import PageState, StateStore
from increcrawl_scrapy.urls import normalize_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

BATCH_MAX_URLS = 1000
BATCH_PAGE_SIZE = 50
UPSERT_CHUNK = 20_000  # one transaction each: large chunks, few commits
#: Origin statuses the callback handles itself (others go to the errback).
HANDLED_STATUSES = [304, 404, 410]
ARGUMENTS = "-a sitemap_url=URL, -a robots_url=URL or -a site_url=URL"


class IncrementalSpider(scrapy.Spider):
    name = "incremental"
    config: IncrecrawlConfig

    def __init__(
        self,
        sitemap_url: str | None = None,
        robots_url: str | None = None,
        site_url: str | None = None,
        seed: str | None = None,
        discover_only: str | bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # -a discover_only=1: fill the database from the sitemaps, fetch nothing.
        self.discover_only = str(discover_only).lower() in ("1", "true", "yes")
        if not (sitemap_url or robots_url or site_url):
            raise ValueError(f"the incremental spider needs one of {ARGUMENTS}")
        for name, value in (
            ("sitemap_url", sitemap_url),
            ("robots_url", robots_url),
            ("site_url", site_url),
        ):
            if value:
                try:
                    normalize_url(value)
                except ValueError as exc:
                    raise ValueError(f"-a {name}: {exc}") from None
        self.sitemap_url = sitemap_url
        self.robots_url = robots_url
        self.site_url = site_url
        first = sitemap_url or robots_url or site_url or ""
        self.increcrawl_seed = seed or normalize_url(first)
        self.seed_host = (urlsplit(first).hostname or "").lower()
        # Sitemaps themselves must be on the seed's host (the sitemaps protocol).
        self._sitemap_scope = Scope(self.seed_host)
        self._scope = self._sitemap_scope  # for pages; widened from settings in from_crawler
        self.run_id: int | None = None
        self._complete = True
        self.discovery_complete: bool | None = None
        self._client: GeonodeClient | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> IncrementalSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        spider.config = IncrecrawlConfig.from_settings(crawler.settings)  # fail at start
        spider._scope = Scope(spider.seed_host, include_subdomains=spider.config.include_subdomains)
        return spider

    # -- phases ----------------------------------------------------------------

    async def start(self) -> AsyncIterator[Any]:
        config: IncrecrawlConfig = self.config
        if config.uses_geonode:
            logger.info("Fetching pages through the Geonode API (key %s)", redact(config.api_key))
            self._client = GeonodeClient(config, self.crawler.stats)
        else:
            logger.info(
                "Fetching pages directly with Scrapy (INCRECRAWL_FETCHER=%s, %s)",
                config.fetcher,
                "no GEONODE_API_KEY" if not config.api_key else "key set",
            )
        state = crawl_state(self.crawler)
        store, self.run_id = state.store, state.run_id
        self.discovery_complete = state.discovery_complete = await self._discover(store)
        if self.discovery_complete:
            missing = store.mark_missing(self.run_id)
            self._stat("missing", missing.marked)
            self._stat("missing_due", missing.due)
        else:
            logger.warning(
                "Discovery was incomplete: pages absent from it are not counted as missing this run"
            )
            self._stat("discovery_incomplete")
        if self.discover_only:
            return
        due = store.due(self.increcrawl_seed, config.max_fetches or None)
        self._stat("due", len(due))
        singles, batched = self._split(due)
        for page in singles:
            yield self._page_request(page)
        for start in range(0, len(batched), BATCH_MAX_URLS):
            async for item in self._run_batch(batched[start : start + BATCH_MAX_URLS]):
                yield item

    def _split(self, due: list[PageState]) -> tuple[list[PageState], list[PageState]]:
        """Rows with validators go one by one (conditional headers); the others as
        batch jobs when there are enough of them and Geonode is the fetcher."""
        plain = [page for page in due if not page.has_validators]
        if self._client is None or len(plain) < self.config.batch_min_urls:
            return due, []
        return [page for page in due if page.has_validators], plain

    # -- discovery ---------------------------------------------------------------

    async def _discover(self, store: StateStore) -> bool:
        complete = True
        sitemaps: list[str] = []
        if self.site_url:
            complete &= await self._discover_by_map(store, self.site_url)
        if self.robots_url:
            response = await self._fetch(self.robots_url)
            if response is None or response.status != 200:
                self._stat("robots/errors")
                logger.warning("Could not read %s", self.robots_url)
                complete = False
            else:
                found = robots_sitemaps(response.body)
                if not found:
                    logger.warning("%s has no Sitemap: lines", self.robots_url)
                    complete = False
                sitemaps += found
        if self.sitemap_url:
            sitemaps.append(self.sitemap_url)
        return complete and await self._discover_sitemaps(store, sitemaps)

    async def _discover_sitemaps(self, store: StateStore, roots: list[str]) -> bool:
        """Read sitemaps breadth first; the next one downloads while this one is parsed."""
        self._complete = True
        queue = deque((url, 0) for url in roots)
        visited: set[str] = set()

        def next_fetch() -> tuple[tuple[str, int], Any] | None:
            taken = self._take(queue, visited)
            return (taken, deferred_from_coro(self._fetch(taken[0]))) if taken else None

        pending = next_fetch()
        while pending is not None:
            (url, depth), fetching = pending
            response = await maybe_deferred_to_future(fetching)
            pending = next_fetch()  # downloads while this one is parsed
            if response is None or response.status != 200:
                status = response.status if response is not None else "no answer"
                logger.warning("Sitemap %s failed (%s): discovery is incomplete", url, status)
                self._stat("sitemap/errors")
                self._complete = False
                continue
            try:
                stats, children, recorded, invalid = await compat.in_thread(
                    self._ingest, store, url, response.body
                )
            except SitemapError as exc:
                logger.warning("Sitemap %s is unusable: %s", url, exc)
                self._stat("sitemap/invalid")
                self._complete = False
                continue
            self._stat("sitemaps")
            if stats.kind == "unchanged":
                self._stat("sitemap/unchanged")
            self._stat("discovered", recorded)
            self._stat("invalid_urls", invalid)
            for reason, count in stats.skipped.items():
                self._stat(f"sitemap/skipped/{reason}", count)
            queue.extend((child, depth + 1) for child in children)
            if pending is None:  # an index's children were not known a moment ago
                pending = next_fetch()
        return self._complete

    def _take(self, queue: deque[tuple[str, int]], visited: set[str]) -> tuple[str, int] | None:
        """The next sitemap worth fetching; the ones skipped are counted."""
        while queue:
            url, depth = queue.popleft()
            if url in visited:
                self._stat("sitemap/repeated")
                continue
            visited.add(url)
            if depth > self.config.sitemap_max_depth:
                logger.warning(
                    "Sitemap %s nests deeper than INCRECRAWL_SITEMAP_MAX_DEPTH=%d",
                    url,
                    self.config.sitemap_max_depth,
                )
                self._stat("sitemap/too_deep")
                self._complete = False
                continue
            if not self._sitemap_scope.allows(url, SitemapStats()):
                self._stat("sitemap/offsite")
                continue
            return url, depth
        return None

    def _ingest(
        self, store: StateStore, url: str, body: bytes
    ) -> tuple[SitemapStats, list[str], int, int]:
        """Parse one sitemap and upsert its URLs as they stream (in a worker thread).
        Returns what was skipped, child sitemaps, URLs recorded and URLs invalid."""
        assert self.run_id is not None
        stats = SitemapStats()
        xml = decompress(body, self.config.sitemap_max_bytes)
        digest = hashlib.sha256(xml).hexdigest()
        if store.sitemap_unchanged(self.run_id, url, digest):
            stats.kind = "unchanged"  # read whole last time and identical: nothing to apply
            return stats, [], 0, 0
        children: list[str] = []
        batch: list[tuple[str, str | None]] = []
        recorded = read = 0
        try:
            for entry in iter_sitemap(xml, stats):
                if not self._scope.allows(entry.loc, stats):
                    continue
                if stats.kind == "sitemapindex":
                    children.append(entry.loc)
                    continue
                batch.append((entry.loc, entry.lastmod))
                if len(batch) >= UPSERT_CHUNK:
                    recorded += store.upsert_discovered(self.run_id, batch, sitemap_url=url)
                    read += len(batch)
                    batch = []
        finally:
            # What was read before a syntax error still counts as seen.
            recorded += store.upsert_discovered(self.run_id, batch, sitemap_url=url)
            read += len(batch)
        if stats.kind == "urlset":
            store.sitemap_read(self.run_id, url, digest)
        return stats, children, recorded, read - recorded

    async def _discover_by_map(self, store: StateStore, site_url: str) -> bool:
        if self._client is None:
            logger.error(
                "-a site_url needs the Geonode API (GEONODE_API_KEY): use "
                "-a sitemap_url or -a robots_url in direct mode"
            )
            return False
        try:
            links = await self._client.map(site_url)
        except GeonodeFatalError as exc:
            self._close(exc.reason)
            return False
        except GeonodeError as exc:
            logger.warning("Geonode map of %s failed: %s", site_url, exc)
            self._stat("map/errors")
            return False
        stats = SitemapStats()
        kept = [(link, None) for link in links if self._scope.allows(link, stats)]
        for reason, count in stats.skipped.items():
            self._stat(f"map/skipped/{reason}", count)
        assert self.run_id is not None
        self._stat("discovered", store.upsert_discovered(self.run_id, kept))
        return True

    async def _fetch(self, url: str) -> scrapy.http.Response | None:
        """A sitemap or robots.txt, straight from the site (never through the API)."""
        request = Request(
            url,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                "geonode": False,
                "download_maxsize": self.config.sitemap_max_bytes,
                "download_warnsize": self.config.sitemap_max_bytes,
            },
        )
        try:
            return await compat.download(self.crawler, request)
        except Exception as exc:  # DNS, refused, too large, ignored by robots.txt...
            logger.warning("Could not fetch %s: %s", url, exc)
            return None

    # -- fetching pages ----------------------------------------------------------

    def _page_request(self, page: PageState) -> Request:
        headers = {}
        if page.etag:
            headers["If-None-Match"] = page.etag
        if page.last_modified:
            headers["If-Modified-Since"] = page.last_modified
        return Request(
            page.url,
            callback=self.parse_page,
            errback=self.page_failed,
            headers=headers,
            dont_filter=True,
            meta={"handle_httpstatus_list": HANDLED_STATUSES, "increcrawl_url": page.url},
        )

    def parse_page(self, response: scrapy.http.Response) -> Iterator[dict[str, Any]]:
        geonode = "geonode" in response.flags
        yield {
            "url": response.meta.get("increcrawl_url", response.url),
            "http_status": response.status,
            "markdown": _markdown(response) if response.status == 200 else None,
            "fetcher": "geonode" if geonode else "direct",
            "etag": _header(response, "ETag"),
            "last_modified": _header(response, "Last-Modified"),
        }

    def page_failed(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        error = failure.value
        status = error.response.status if isinstance(error, HttpError) else 0
        logger.info(
            "Fetch of %s failed (%s); it stays due",
            request.url,
            status or failure.getErrorMessage(),
        )
        yield {
            "url": request.meta.get("increcrawl_url", request.url),
            "http_status": status,
            "error": failure.getErrorMessage(),
        }

    # -- batch jobs --------------------------------------------------------------

    async def _run_batch(self, pages: list[PageState]) -> AsyncIterator[dict[str, Any]]:
        client = self._client
        assert client is not None
        body = {
            "urls": [page.url for page in pages],
            "formats": ["markdown"],
            "render_js": self.config.render_js,
        }
        try:
            job_id = (await client.submit_batch(body))["job_id"]
            finished = await self._wait_for_batch(client, job_id)
            if not finished:
                return
            async for item in self._batch_results(client, job_id):
                yield item
        except GeonodeFatalError as exc:
            self._close(exc.reason)
        except GeonodeError as exc:
            logger.warning("Batch of %d pages failed: %s; they stay due", len(pages), exc)
            self._stat("batch/errors")

    async def _wait_for_batch(self, client: GeonodeClient, job_id: str) -> bool:
        deadline = time.monotonic() + self.config.batch_timeout
        while True:
            await asyncio.sleep(self.config.batch_poll_interval)
            status = (await client.batch_status(job_id, 1, 1))["status"]
            if status in ("completed", "failed", "cancelled"):
                return status == "completed"
            if time.monotonic() > deadline:
                logger.warning(
                    "Batch job %s still %s after GEONODE_BATCH_TIMEOUT=%gs: "
                    "cancelled, its pages stay due",
                    job_id,
                    status,
                    self.config.batch_timeout,
                )
                self._stat("batch/timeouts")
                await client.cancel_batch(job_id)
                return False

    async def _batch_results(self, client: GeonodeClient, job_id: str) -> AsyncIterator[dict]:
        page, seen = 1, set()
        while True:
            answer = await client.batch_status(job_id, page, BATCH_PAGE_SIZE)
            if page == 1:
                tokens = _mapping(answer.get("token_summary")).get("tokens_charged_total")
                if isinstance(tokens, int) and tokens > 0:
                    geonode_stat(self.crawler.stats, "tokens_charged", tokens)
            results = answer.get("results") or []
            for result in results:
                if not isinstance(result, dict) or not isinstance(result.get("url"), str):
                    self._stat("batch/bad_results")
                    continue
                if result.get("input_index") in seen:
                    self._stat("batch/repeated_results")
                    continue
                seen.add(result.get("input_index"))
                yield _batch_item(result)
            if len(results) < BATCH_PAGE_SIZE:
                break
            page += 1
        total = answer.get("total_urls")
        if isinstance(total, int) and len(seen) < total:
            # Pages that skipped items: those pages were not fetched for us; they stay due.
            logger.warning("Batch job %s returned %d of its %d results", job_id, len(seen), total)
            self._stat("batch/missing_results", total - len(seen))

    # -- closing -------------------------------------------------------------------

    def _close(self, reason: str) -> None:
        logger.error("Geonode API unusable; closing the spider (%s)", reason)
        deferred_from_coro(compat.close_spider(self.crawler, reason))

    async def closed(self, reason: str) -> None:
        if self._client is not None:
            await self._client.close()

    def _stat(self, key: str, count: int = 1) -> None:
        if count and self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"increcrawl/{key}", count)


def _markdown(response: scrapy.http.Response) -> str:
    """The page as markdown, whoever fetched it, so both paths hash the same text."""
    if isinstance(response, HtmlResponse):
        return html_to_markdown(response.body)
    if isinstance(response, TextResponse):  # markdown from the API, or plain text
        return response.text
    # Not text at all (a PDF, an image): its bytes still tell whether it changed.
    return f"binary sha256:{hashlib.sha256(response.body).hexdigest()}"


def _header(response: scrapy.http.Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _batch_item(result: dict[str, Any]) -> dict[str, Any]:
    metadata = _mapping(result.get("metadata"))
    data = _mapping(result.get("data"))
    status = metadata.get("http_status")
    if result.get("status") == "failed":
        status = origin_status_of(result.get("error_code"), result.get("error_message"))
    if not isinstance(status, int):
        return {
            "url": result["url"],
            "http_status": 0,
            "fetcher": "geonode-batch",
            "error": result.get("error_code") or "no status",
        }
    markdown = data.get("markdown") if status == 200 else None
    return {
        "url": result["url"],
        "http_status": status,
        "markdown": markdown if isinstance(markdown, str) else None,
        "fetcher": "geonode-batch",
        "etag": None,
        "last_modified": None,
    }
