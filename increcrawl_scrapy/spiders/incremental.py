"""The ``incremental`` spider: discover, queue what is due, fetch it.

    scrapy crawl incremental -a sitemap_url=https://example.com/sitemap.xml -o changes.jsonl

The spider keeps the phases of a run. Sitemaps are walked by ``sitemap_walk``,
batch jobs spoken by ``geonode.batch``; the spider never fingerprints or decides
anything about content: it yields one item per fetched page (or per failure) and
``IncrementalStatePipeline`` records it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import HtmlResponse, Request, TextResponse
from scrapy.http.request import NO_CALLBACK
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.error import TimeoutError as DownloadTimeout

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import IncrecrawlConfig, redact
from increcrawl_scrapy.discovery import PARSER_VERSION
from increcrawl_scrapy.geonode.batch import MAX_URLS, BatchJob, page_result
from increcrawl_scrapy.geonode.client import GeonodeClient, client_for
from increcrawl_scrapy.geonode.errors import GeonodeError, GeonodeFatalError
from increcrawl_scrapy.geonode.payload import META_ANSWER, META_PARAMS
from increcrawl_scrapy.markdown import html_to_markdown
from increcrawl_scrapy.redirects import OffsiteRedirect
from increcrawl_scrapy.rows import GONE_STATUSES, PageState
from increcrawl_scrapy.scope import Scope, UrlRefused, request_target
from increcrawl_scrapy.shared_state import crawl_state
from increcrawl_scrapy.sitemap_walk import SitemapWalk
from increcrawl_scrapy.urls import RULES_VERSION, normalization_settings, normalize_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)

#: Origin statuses the callback handles itself (others go to the errback).
HANDLED_STATUSES = [304, *sorted(GONE_STATUSES)]
ARGUMENTS = "-a sitemap_url=URL, -a robots_url=URL or -a site_url=URL"
#: ``request.meta`` keys of a page request: its URL and its row's key.
META_URL = "increcrawl_url"
META_KEY = "increcrawl_key"


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
                    raise ValueError(f"-a {name}: not a URL to crawl ({exc})") from None
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
        self._digest_salt = b""
        self.run: Run | None = None
        self.discovery_complete: bool | None = None
        self._client: GeonodeClient | None = None
        self._active_jobs: set[BatchJob] = set()  # to cancel if the crawl stops

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
            self._client = client_for(self.crawler)
        else:
            logger.info(
                "Fetching pages directly with Scrapy (INCRECRAWL_FETCHER=%s, %s)",
                config.fetcher,
                "no GEONODE_API_KEY" if not config.api_key else "key set",
            )
        state = crawl_state(self.crawler)
        run = self.run = state.run
        self.discovery_complete = state.discovery_complete = await self._discover(run)
        dates = run.apply_lastmod()
        stats.inc(self.crawler.stats, stats.LASTMOD_MOVED, dates.moved)
        stats.inc(self.crawler.stats, stats.LASTMOD_DUE, dates.due)
        stats.inc(self.crawler.stats, stats.LASTMOD_WAVES, len(dates.waves))
        stats.inc(self.crawler.stats, stats.LASTMOD_SAMPLED, dates.sampled)
        if self.discovery_complete:
            missing = run.mark_missing()
            stats.inc(self.crawler.stats, stats.MISSING, missing.marked)
            stats.inc(self.crawler.stats, stats.MISSING_DUE, missing.due)
        else:
            logger.warning(
                "Discovery was incomplete: pages absent from it are not counted as missing this run"
            )
            stats.inc(self.crawler.stats, stats.DISCOVERY_INCOMPLETE)
        if self.discover_only:
            return
        due = state.store.due(self.increcrawl_seed, config.max_fetches or None)
        stats.inc(self.crawler.stats, stats.DUE, len(due))
        stats.inc(self.crawler.stats, stats.DUE_GONE, sum(page.gone for page in due))
        singles, batched = self._split(due)
        for page in singles:
            yield self._page_request(page)
        for start in range(0, len(batched), MAX_URLS):
            async for item in self._run_batch(batched[start : start + MAX_URLS]):
                yield item

    def _split(self, due: list[PageState]) -> tuple[list[PageState], list[PageState]]:
        """Rows with validators go one by one (conditional headers); the others as
        batch jobs when there are enough of them and Geonode is the fetcher."""
        plain = [page for page in due if not _conditions(page)]
        if self._client is None or len(plain) < self.config.batch_min_urls:
            return due, []
        return [page for page in due if _conditions(page)], plain

    # -- discovery ---------------------------------------------------------------

    async def _discover(self, run: Run) -> bool:
        """Read every source given; discovery is complete only if all of them were."""
        walk = SitemapWalk(
            run,
            self._fetch,
            sitemap_scope=self._sitemap_scope,
            page_scope=self.increcrawl_scope,
            config=self.config,
            digest_salt=self._digest_salt,
            origin=self._origin,
            crawler_stats=self.crawler.stats,
        )
        complete = True
        roots: list[str] = []
        if self.site_url:
            complete = await self._discover_by_map(run, self.site_url) and complete
        if self.robots_url:
            found = await walk.robots(self.robots_url)
            complete = complete and bool(found)
            roots += found or []
        if self.sitemap_url:
            roots.append(self.sitemap_url)
        return await walk.walk(roots) and complete

    async def _discover_by_map(self, run: Run, site_url: str) -> bool:
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
            stats.inc(self.crawler.stats, stats.MAP_ERRORS)
            return False
        skipped: Counter[str] = Counter()
        kept: list[tuple[str, str | None]] = []
        for link in links:
            requested = self.increcrawl_scope.request_url(link, skipped)
            if requested is not None:
                kept.append((requested, None))
        for reason, count in skipped.items():
            stats.inc(self.crawler.stats, stats.MAP_SKIPPED, count, reason=reason)
        stats.inc(self.crawler.stats, stats.DISCOVERED, run.upsert(kept))
        return True

    async def _fetch(self, url: str) -> scrapy.http.Response | None:
        """A sitemap or robots.txt, straight from the site (never through the API)."""
        request = Request(
            url,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                META_PARAMS: False,
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
                META_URL: page.url,
                META_KEY: page.normalized_url,
            },
        )

    def parse_page(self, response: scrapy.http.Response) -> Iterator[dict[str, Any]]:
        row = {
            "url": response.meta.get(META_URL, response.url),
            "normalized_url": response.meta.get(META_KEY),
        }
        final_url = _final_url(response)
        if final_url is not None and not self.increcrawl_scope.follows_redirect(final_url):
            # The API followed a redirect to another site: not this page's content.
            stats.inc(self.crawler.stats, stats.REDIRECT_OFFSITE)
            logger.warning("%s redirects to another site (%s): not kept", response.url, final_url)
            yield {
                **row,
                "http_status": 0,
                "error": f"redirect to another site: {final_url}",
                "site_failure": True,
            }
            return
        yield {
            **row,
            "final_url": final_url,
            "http_status": response.status,
            "markdown": _markdown(response) if response.status == 200 else None,
            "fetcher": "geonode" if "geonode" in response.flags else "direct",
            "etag": _header(response, "ETag"),
            "last_modified": _header(response, "Last-Modified"),
        }

    def page_failed(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        status, site_failure = _failure_kind(failure.value)
        logger.info(
            "Fetch of %s failed (%s); %s",
            request.url,
            status or failure.getErrorMessage(),
            "it backs off" if site_failure else "it stays due",
        )
        yield {
            "url": request.meta.get(META_URL, request.url),
            "normalized_url": request.meta.get(META_KEY),
            "http_status": status,
            "error": failure.getErrorMessage(),
            "site_failure": site_failure,
        }

    # -- batch jobs --------------------------------------------------------------

    async def _run_batch(self, pages: list[PageState]) -> AsyncIterator[dict[str, Any]]:
        assert self._client is not None
        job = BatchJob(
            self._client,
            [page.url for page in pages],
            formats=["markdown"],
            render_js=self.config.render_js,
            poll_interval=self.config.batch_poll_interval,
            timeout=self.config.batch_timeout,
        )
        try:
            await job.submit()
            self._active_jobs.add(job)
            status = await job.wait()
            self._active_jobs.discard(job)  # finished or cancelled
            if status == "failed":
                logger.warning("Batch job %s failed: its completed pages are kept", job.job_id)
                stats.inc(self.crawler.stats, stats.BATCH_FAILED)
            if status not in ("completed", "failed"):
                return
            async for index, result in job.results():
                fields = page_result(result)
                if fields is not None:  # a result the job never finished stays due
                    yield _batch_item(pages[index], result, fields)
        except GeonodeFatalError as exc:
            self._close(exc.reason)
        except GeonodeError as exc:
            logger.warning("Batch of %d pages failed: %s; they stay due", len(pages), exc)
            stats.inc(self.crawler.stats, stats.BATCH_ERRORS)

    # -- closing -------------------------------------------------------------------

    def _close(self, reason: str) -> None:
        logger.error("Geonode API unusable; closing the spider (%s)", reason)
        deferred_from_coro(compat.close_spider(self.crawler, reason))

    async def closed(self, reason: str) -> None:
        for job in list(self._active_jobs):
            # The crawl stops while a job runs: stop it too, so it charges no more.
            try:
                await job.cancel()
                logger.info("Batch job %s cancelled at shutdown; its pages stay due", job.job_id)
                stats.inc(self.crawler.stats, stats.BATCH_CANCELLED)
            except GeonodeError as exc:
                logger.warning("Could not cancel batch job %s at shutdown: %s", job.job_id, exc)
        self._active_jobs.clear()


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
    requested = response.meta.get(META_URL, response.url)
    answer = response.meta.get(META_ANSWER)
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


def _batch_item(page: PageState, result: dict[str, Any], fields: dict[str, Any]) -> dict:
    """The item of a batch result, on the row that asked for it."""
    final = result.get("url")
    return {
        "url": page.url,
        "normalized_url": page.normalized_url,
        "final_url": final if isinstance(final, str) and final != page.url else None,
        "fetcher": "geonode-batch",
        **fields,
    }
