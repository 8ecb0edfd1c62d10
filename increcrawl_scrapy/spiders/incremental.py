"""The ``incremental`` spider: discover, queue what is due, fetch it.

    scrapy crawl incremental -a sitemap_url=https://example.com/sitemap.xml -o changes.jsonl

The spider never fingerprints or decides anything about content: it yields one
item per fetched page (or per failure) and ``IncrementalStatePipeline`` records it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse, Request, TextResponse
from scrapy.http.request import NO_CALLBACK
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from twisted.internet.error import TimeoutError as DownloadTimeout

from increcrawl_scrapy import compat
from increcrawl_scrapy.config import IncrecrawlConfig, redact
from increcrawl_scrapy.discovery import (
    PARSER_VERSION,
    SitemapError,
    SitemapStats,
    decompress,
    iter_sitemap,
    robots_sitemaps,
)
from increcrawl_scrapy.geonode.client import GeonodeClient
from increcrawl_scrapy.geonode.client import stat as geonode_stat
from increcrawl_scrapy.geonode.errors import (
    GeonodeError,
    GeonodeFatalError,
    is_site_error_code,
    origin_status_of,
)
from increcrawl_scrapy.markdown import html_to_markdown
from increcrawl_scrapy.redirects import OffsiteRedirect
from increcrawl_scrapy.schedule import GONE_STATUSES
from increcrawl_scrapy.scope import Scope, UrlRefused, is_ip_literal, request_target
from increcrawl_scrapy.shared_state import crawl_state
from increcrawl_scrapy.state import PageState, StateStore
from increcrawl_scrapy.urls import RULES_VERSION, normalization_settings, normalize_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

BATCH_MAX_URLS = 1000
BATCH_PAGE_SIZE = 50
UPSERT_CHUNK = 20_000  # one transaction each: large chunks, few commits
#: Origin statuses the callback handles itself (others go to the errback).
HANDLED_STATUSES = [304, *sorted(GONE_STATUSES)]
ARGUMENTS = "-a sitemap_url=URL, -a robots_url=URL or -a site_url=URL"


@dataclass
class Ingested:
    """What reading one sitemap gave."""

    stats: SitemapStats
    children: list[str] = field(default_factory=list)
    recorded: int = 0
    invalid: int = 0


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
        sources: dict[str, tuple[str, str]] = {}
        for name, value in (
            ("sitemap_url", sitemap_url),
            ("robots_url", robots_url),
            ("site_url", site_url),
        ):
            if value:
                try:
                    sources[name] = request_target(value.strip())
                    normalize_url(sources[name][0])
                except (UrlRefused, ValueError) as exc:
                    raise ValueError(
                        f"-a {name}: not a URL the crawl can request ({exc})"
                    ) from None
        self.sitemap_url = sources.get("sitemap_url", ("", ""))[0] or None
        self.robots_url = sources.get("robots_url", ("", ""))[0] or None
        self.site_url = sources.get("site_url", ("", ""))[0] or None
        first, self.seed_host = next(iter(sources.values()))
        self.increcrawl_seed = seed or normalize_url(first)
        self._origin = "{0.scheme}://{0.netloc}".format(urlsplit(first))
        # Sitemaps themselves must be on the seed's host (the sitemaps protocol),
        # unless the seed's robots.txt declares them (cross-submission).
        self._sitemap_scope = Scope(self.seed_host)
        #: Where pages may be requested; widened from settings in from_crawler.
        #: SiteRedirectMiddleware reads it for redirects.
        self.increcrawl_scope = self._sitemap_scope
        self._declared: set[str] | None = None  # Sitemap: lines of the seed's robots.txt
        self._digest_salt = b""
        self.run_id: int | None = None
        self._complete = True
        self.discovery_complete: bool | None = None
        self._client: GeonodeClient | None = None
        self._active_jobs: set[str] = set()  # batch jobs to cancel if the crawl stops

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> IncrementalSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        config = spider.config = IncrecrawlConfig.from_settings(crawler.settings)  # fail at start
        spider.increcrawl_scope = Scope(
            spider.seed_host, include_subdomains=config.include_subdomains
        )
        # Whatever changes what a sitemap yields: an identical sitemap read under
        # other settings must be applied again.
        spider._digest_salt = json.dumps(
            {
                "scope": [spider.seed_host, config.include_subdomains],
                "normalization": normalization_settings(config),
                "rules": RULES_VERSION,
                "parser": PARSER_VERSION,
            },
            sort_keys=True,
        ).encode()
        return spider

    # -- phases ----------------------------------------------------------------

    async def start(self) -> AsyncIterator[Any]:
        config: IncrecrawlConfig = self.config
        if config.uses_geonode:
            logger.info(
                "Fetching pages through the Geonode API at %s (key %s)",
                config.api_url,
                redact(config.api_key),
            )
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
        self._stat("due_gone", sum(page.gone for page in due))
        singles, batched = self._split(due)
        for page in singles:
            yield self._page_request(page)
        for start in range(0, len(batched), BATCH_MAX_URLS):
            async for item in self._run_batch(batched[start : start + BATCH_MAX_URLS]):
                yield item

    def _split(self, due: list[PageState]) -> tuple[list[PageState], list[PageState]]:
        """Rows with validators go one by one (conditional headers); the others as
        batch jobs when there are enough of them and Geonode is the fetcher."""
        plain = [page for page in due if not _conditions(page)]
        if self._client is None or len(plain) < self.config.batch_min_urls:
            return due, []
        return [page for page in due if _conditions(page)], plain

    # -- discovery ---------------------------------------------------------------

    async def _discover(self, store: StateStore) -> bool:
        """Read every source given; discovery is complete only if all of them were."""
        complete = True
        roots: list[str] = []
        if self.site_url:
            complete = await self._discover_by_map(store, self.site_url) and complete
        if self.robots_url:
            found = await self._robots_sitemaps(self.robots_url)
            if not found:
                complete = False
            if self._is_seed_robots(self.robots_url):
                self._declared = set(found or ())
            roots += found or []
        if self.sitemap_url:
            roots.append(self.sitemap_url)
        return await self._discover_sitemaps(store, roots) and complete

    def _is_seed_robots(self, url: str) -> bool:
        return url == f"{self._origin}/robots.txt"

    async def _robots_sitemaps(self, url: str) -> list[str] | None:
        """The ``Sitemap:`` URLs of a robots.txt as they will be requested, or None
        when it cannot be read."""
        response = await self._fetch(url)
        if response is None or response.status != 200:
            self._stat("robots/errors")
            logger.warning("Could not read %s", url)
            return None
        found = []
        for line in robots_sitemaps(response.body):
            try:
                sitemap, host = request_target(line)
            except UrlRefused as refused:
                self._stat(f"sitemap/skipped/{refused.reason}")
                continue
            if not self._sitemap_scope.covers(host) and is_ip_literal(host):
                # Cross-submission is for sitemaps on a CDN or storage host, which
                # have names; an address is where internal services live.
                logger.warning("%s: Sitemap: %s on an IP address is not read", url, sitemap)
                self._stat("sitemap/skipped/ip_host")
                continue
            found.append(sitemap)
        if not found:
            logger.warning("%s has no usable Sitemap: lines", url)
        return found

    async def _declared_by_robots(self, url: str) -> bool:
        """Whether the seed's own robots.txt lists *url* (read once, when needed)."""
        if self._declared is None:
            self._declared = set(await self._robots_sitemaps(f"{self._origin}/robots.txt") or ())
        return url in self._declared

    async def _discover_sitemaps(self, store: StateStore, roots: list[str]) -> bool:
        """Read sitemaps breadth first; the next one downloads while this one is parsed."""
        self._complete = True
        queue = deque((url, 0) for url in roots)
        visited: set[str] = set()

        async def next_fetch() -> tuple[tuple[str, int], Any] | None:
            taken = await self._take(queue, visited)
            return (taken, deferred_from_coro(self._fetch(taken[0]))) if taken else None

        pending = await next_fetch()
        while pending is not None:
            (url, depth), fetching = pending
            response = await maybe_deferred_to_future(fetching)
            pending = await next_fetch()  # downloads while this one is parsed
            if response is None or response.status != 200:
                status = response.status if response is not None else "no answer"
                logger.warning("Sitemap %s failed (%s): discovery is incomplete", url, status)
                self._stat("sitemap/errors")
                self._complete = False
                continue
            try:
                ingested = await compat.in_thread(self._ingest, store, url, response.body)
            except SitemapError as exc:
                logger.warning("Sitemap %s is unusable: %s", url, exc)
                self._stat("sitemap/invalid")
                self._complete = False
                continue
            self._stat("sitemaps")
            if ingested.stats.kind == "unchanged":
                self._stat("sitemap/unchanged")
            self._stat("discovered", ingested.recorded)
            self._stat("invalid_urls", ingested.invalid)
            for reason, count in ingested.stats.skipped.items():
                self._stat(f"sitemap/skipped/{reason}", count)
            queue.extend((child, depth + 1) for child in ingested.children)
            if pending is None:  # an index's children were not known a moment ago
                pending = await next_fetch()
        return self._complete

    async def _take(
        self, queue: deque[tuple[str, int]], visited: set[str]
    ) -> tuple[str, int] | None:
        """The next sitemap worth fetching; the ones skipped are counted."""
        while queue:
            loc, depth = queue.popleft()
            if loc in visited:
                self._stat("sitemap/repeated")
                continue
            visited.add(loc)
            if depth > self.config.sitemap_max_depth:
                logger.warning(
                    "Sitemap %s nests deeper than INCRECRAWL_SITEMAP_MAX_DEPTH=%d",
                    loc,
                    self.config.sitemap_max_depth,
                )
                self._stat("sitemap/too_deep")
                self._complete = False
                continue
            if depth == 0:
                return loc, depth  # given by the user or the seed's robots.txt
            skipped: Counter[str] = Counter()
            url = self._sitemap_scope.request_url(loc, skipped)
            if url is None and "offsite" in skipped:
                url = request_target(loc)[0]
                if not await self._declared_by_robots(url):
                    url = None
            if url is None:
                logger.warning(
                    "Child sitemap %s is not on %s (nor declared by its robots.txt): "
                    "not read, discovery is incomplete",
                    loc[:200],
                    self.seed_host,
                )
                self._stat("sitemap/offsite")
                self._complete = False
                continue
            return url, depth
        return None

    def _ingest(self, store: StateStore, url: str, body: bytes) -> Ingested:
        """Parse one sitemap and upsert its URLs as they stream (in a worker thread)."""
        assert self.run_id is not None
        ingested = Ingested(SitemapStats())
        stats = ingested.stats
        xml = decompress(body, self.config.sitemap_max_bytes)
        digest = hashlib.sha256(self._digest_salt + xml).hexdigest()
        if store.sitemap_unchanged(self.run_id, url, digest):
            stats.kind = "unchanged"  # read whole last time and identical: nothing to apply
            return ingested
        batch: list[tuple[str, str | None]] = []
        read = 0
        try:
            for entry in iter_sitemap(xml, stats):
                if stats.kind == "sitemapindex":
                    ingested.children.append(entry.loc)  # judged when taken
                    continue
                requested = self.increcrawl_scope.request_url(entry.loc, stats.skipped)
                if requested is None:
                    continue
                batch.append((requested, entry.lastmod))
                if len(batch) >= UPSERT_CHUNK:
                    ingested.recorded += store.upsert_discovered(
                        self.run_id, batch, sitemap_url=url
                    )
                    read += len(batch)
                    batch = []
        finally:
            # What was read before a syntax error still counts as seen.
            ingested.recorded += store.upsert_discovered(self.run_id, batch, sitemap_url=url)
            read += len(batch)
        if stats.kind == "urlset":
            store.sitemap_read(self.run_id, url, digest)
        ingested.invalid = read - ingested.recorded
        return ingested

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
        skipped: Counter[str] = Counter()
        kept: list[tuple[str, str | None]] = []
        for link in links:
            requested = self.increcrawl_scope.request_url(link, skipped)
            if requested is not None:
                kept.append((requested, None))
        for reason, count in skipped.items():
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
        return Request(
            page.url,
            callback=self.parse_page,
            errback=self.page_failed,
            headers=_conditions(page),
            dont_filter=True,
            meta={
                "handle_httpstatus_list": HANDLED_STATUSES,
                "increcrawl_url": page.url,
                "increcrawl_key": page.normalized_url,
            },
        )

    def parse_page(self, response: scrapy.http.Response) -> Iterator[dict[str, Any]]:
        geonode = "geonode" in response.flags
        final_url = _final_url(response)
        if final_url is not None and not self.increcrawl_scope.follows_redirect(final_url):
            # The API followed a redirect to another site: not this page's content.
            self._stat("redirect/offsite")
            logger.warning("%s redirects to another site (%s): not kept", response.url, final_url)
            yield {
                "url": response.meta.get("increcrawl_url", response.url),
                "normalized_url": response.meta.get("increcrawl_key"),
                "http_status": 0,
                "error": f"redirect to another site: {final_url}",
                "site_failure": True,
            }
            return
        yield {
            "url": response.meta.get("increcrawl_url", response.url),
            "normalized_url": response.meta.get("increcrawl_key"),
            "final_url": final_url,
            "http_status": response.status,
            "markdown": _markdown(response) if response.status == 200 else None,
            "fetcher": "geonode" if geonode else "direct",
            "etag": _header(response, "ETag"),
            "last_modified": _header(response, "Last-Modified"),
        }

    def page_failed(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        error = failure.value
        status, site_failure = _failure_kind(error)
        logger.info(
            "Fetch of %s failed (%s); %s",
            request.url,
            status or failure.getErrorMessage(),
            "it backs off" if site_failure else "it stays due",
        )
        yield {
            "url": request.meta.get("increcrawl_url", request.url),
            "normalized_url": request.meta.get("increcrawl_key"),
            "http_status": status,
            "error": failure.getErrorMessage(),
            "site_failure": site_failure,
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
            self._active_jobs.add(job_id)
            status = await self._wait_for_batch(client, job_id)
            self._active_jobs.discard(job_id)  # finished or cancelled
            if status == "failed":
                logger.warning("Batch job %s failed: its completed pages are kept", job_id)
                self._stat("batch/failed")
            if status in ("completed", "failed"):
                async for item in self._batch_results(client, job_id, pages):
                    yield item
        except GeonodeFatalError as exc:
            self._close(exc.reason)
        except GeonodeError as exc:
            logger.warning("Batch of %d pages failed: %s; they stay due", len(pages), exc)
            self._stat("batch/errors")

    async def _wait_for_batch(self, client: GeonodeClient, job_id: str) -> str | None:
        """The job's final status, or None if it outlasted GEONODE_BATCH_TIMEOUT."""
        deadline = time.monotonic() + self.config.batch_timeout
        while True:
            await asyncio.sleep(self.config.batch_poll_interval)
            status = (await client.batch_status(job_id, 1, 1))["status"]
            if status in ("completed", "failed", "cancelled"):
                return str(status)
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
                return None

    async def _batch_results(
        self, client: GeonodeClient, job_id: str, pages: list[PageState]
    ) -> AsyncIterator[dict]:
        """Each result on the row that asked for it, by ``input_index`` (the API
        may answer with a final or canonical URL)."""
        page, seen = 1, set()
        while True:
            answer = await client.batch_status(job_id, page, BATCH_PAGE_SIZE)
            if page == 1:
                tokens = _mapping(answer.get("token_summary")).get("tokens_charged_total")
                if isinstance(tokens, int) and tokens > 0:
                    geonode_stat(self.crawler.stats, "tokens_charged", tokens)
            results = answer.get("results") or []
            for result in results:
                index = result.get("input_index") if isinstance(result, dict) else None
                if not isinstance(index, int) or isinstance(index, bool):
                    self._stat("batch/bad_results")
                    continue
                if not 0 <= index < len(pages):
                    self._stat("batch/bad_results")
                    continue
                if index in seen:
                    self._stat("batch/repeated_results")
                    continue
                seen.add(index)
                item = _batch_item(pages[index], result)
                if item is not None:  # still queued or running when the job failed
                    yield item
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
        if self._client is None:
            return
        for job_id in list(self._active_jobs):
            # The crawl stops while a job runs: stop it too, so it charges no more.
            try:
                await self._client.cancel_batch(job_id)
                logger.info("Batch job %s cancelled at shutdown; its pages stay due", job_id)
                self._stat("batch/cancelled")
            except GeonodeError as exc:
                logger.warning("Could not cancel batch job %s at shutdown: %s", job_id, exc)
        self._active_jobs.clear()
        await self._client.close()

    def _stat(self, key: str, count: int = 1) -> None:
        if count and self.crawler.stats is not None:
            self.crawler.stats.inc_value(f"increcrawl/{key}", count)


def _conditions(page: PageState) -> dict[str, str]:
    """Conditional headers for a page; none for a gone page (it may be back)."""
    headers: dict[str, str] = {}
    if page.gone:
        return headers
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    return headers


def _failure_kind(error: BaseException | None) -> tuple[int, bool]:
    """``(origin status or 0, whether the site failed)`` for a failed page fetch.
    Site failures back off; API and transport failures leave the page due."""
    if isinstance(error, HttpError):
        return error.response.status, True
    if isinstance(error, OffsiteRedirect):
        return error.status, True
    if isinstance(error, GeonodeError):
        return 0, error.site_failure
    if isinstance(error, DownloadTimeout):
        return 0, True  # the origin did not answer in DOWNLOAD_TIMEOUT
    return 0, False


def _final_url(response: scrapy.http.Response) -> str | None:
    """Where the page was finally fetched from, when not the requested URL."""
    requested = response.meta.get("increcrawl_url", response.url)
    answer = response.meta.get("geonode_api_response")
    final = _mapping(_mapping(answer).get("metadata")).get("url") if answer else response.url
    return final if isinstance(final, str) and final != requested else None


def _markdown(response: scrapy.http.Response) -> str:
    """The page as markdown, whoever fetched it, so both paths hash the same text."""
    if isinstance(response, HtmlResponse):
        # Decoded the way Scrapy decodes it (header, BOM, meta, then detection).
        return html_to_markdown(response.text)
    if isinstance(response, TextResponse):  # markdown from the API, or plain text
        return response.text
    # Not text at all (a PDF, an image): its bytes still tell whether it changed.
    return f"binary sha256:{hashlib.sha256(response.body).hexdigest()}"


def _header(response: scrapy.http.Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _batch_item(page: PageState, result: dict[str, Any]) -> dict[str, Any] | None:
    metadata = _mapping(result.get("metadata"))
    data = _mapping(result.get("data"))
    final = result.get("url")
    item: dict[str, Any] = {
        "url": page.url,
        "normalized_url": page.normalized_url,
        "final_url": final if isinstance(final, str) and final != page.url else None,
        "fetcher": "geonode-batch",
    }
    if result.get("status") in ("queued", "processing", "pending", "cancelled"):
        return None
    status = metadata.get("http_status")
    if result.get("status") == "failed":
        status = origin_status_of(result.get("error_code"), result.get("error_message"))
    if not isinstance(status, int) or isinstance(status, bool):
        code = result.get("error_code")
        return {
            **item,
            "http_status": 0,
            "error": code or "no status",
            "site_failure": is_site_error_code(code),
        }
    markdown = data.get("markdown") if status == 200 else None
    return {
        **item,
        "http_status": status,
        "markdown": markdown if isinstance(markdown, str) else None,
        "etag": None,
        "last_modified": None,
    }
