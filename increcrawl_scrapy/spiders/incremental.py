"""The ``incremental`` spider: discover, queue what is due, fetch it.

    scrapy crawl incremental -a sitemap_url=https://example.com/sitemap.xml -o changes.jsonl

The spider keeps the phases of a run. Its sources are read by ``discovery.sources``,
its due pages fetched by the crawl's one fetcher (``spiders/fetchers/``: direct,
Geonode, batch jobs or hybrid); the spider never judges content: it yields one item
per fetched page (or per failure) and ``IncrementalStatePipeline`` records it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import close_reasons, compat, stats
from increcrawl_scrapy.config import IncrecrawlConfig, config_for
from increcrawl_scrapy.crawl.arguments import flag, unknown_arguments
from increcrawl_scrapy.crawl.run_warnings import keep_warnings
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.crawl.validators import conditions
from increcrawl_scrapy.discovery.after import (
    after_discovery,
    discovery_stopped,
    nothing_kept,
    stopped,
)
from increcrawl_scrapy.discovery.sources import (
    Discoverer,
    DiscoveryInputs,
    digest_salt,
    parse_sources,
)
from increcrawl_scrapy.discovery.url_rules import UrlRules
from increcrawl_scrapy.geonode.payload import META_ANSWER, formats_for
from increcrawl_scrapy.schedule.rows import GONE_STATUSES, PageState
from increcrawl_scrapy.scope import Scope, port_of, requested_url
from increcrawl_scrapy.spiders import progress
from increcrawl_scrapy.spiders.cluster_share import SHARED_WAIT, share_if_shared
from increcrawl_scrapy.spiders.due_rows import due_rows
from increcrawl_scrapy.spiders.fetchers import Fetcher, FetchInputs, fetcher_for
from increcrawl_scrapy.spiders.page_content import PageContent
from increcrawl_scrapy.spiders.page_items import (
    META_KEY,
    META_UNLISTED,
    META_URL,
    OFFSITE,
    collected,
    failed_item,
    final_url_of,
    page_item,
    row_of,
    tokens_of,
    too_large,
)
from increcrawl_scrapy.spiders.rules import compile_rules, routed
from increcrawl_scrapy.spiders.site_fetch import SiteFetch
from increcrawl_scrapy.spiders.skipping import ROBOTS, without_excluded
from increcrawl_scrapy.state import CHUNK, StateLockedError
from increcrawl_scrapy.urls import normalize_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from increcrawl_scrapy.crawl.shared_state import CrawlState
    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)

#: Origin statuses the callback handles itself (others go to the errback).
HANDLED_STATUSES = [304, *sorted(GONE_STATUSES)]


class IncrementalSpider(scrapy.Spider):
    name = "incremental"
    config: IncrecrawlConfig
    #: What the pipeline fingerprints (the page's text, ``content/page_text.py``).
    increcrawl_content_field = "markdown"
    #: Geonode returns the page's HTML: its text is taken as a direct fetch's.
    increcrawl_formats = ("html",)
    #: ``(regex, callback)`` pairs, as ``SitemapSpider.sitemap_rules``: a due page
    #: whose URL matches is handed to the subclass's callback (``spiders/rules.py``).
    page_rules: Sequence[tuple[str, str | Callable[..., Any]]] = ()
    #: Due rows read at a time: Scrapy's scheduler holds one such chunk at most.
    queue_chunk = CHUNK
    _page_rules: list[tuple[re.Pattern[str], Callable[..., Any]]] | None = None

    def __init__(
        self,
        sitemap_url: str | None = None,
        robots_url: str | None = None,
        site_url: str | None = None,
        feed_url: str | None = None,
        seed: str | None = None,
        discover_only: str | bool = False,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # -a discover_only=1: fill the database from the sitemaps, fetch nothing.
        self.discover_only = flag("discover_only", discover_only)
        # -a increcrawl_reset=1 (read by the crawl's state): checked here, at start.
        self.increcrawl_reset = flag("increcrawl_reset", kwargs.pop("increcrawl_reset", False))
        # All of them under one seed, named after the first.
        self.sources = parse_sources(
            sitemap_url=sitemap_url, robots_url=robots_url, site_url=site_url, feed_url=feed_url
        )
        first, self.seed_host = next(iter(self.sources.values()))[0]
        self.increcrawl_seed = seed or normalize_url(first)
        self._origin = "{0.scheme}://{0.netloc}".format(urlsplit(first))
        # Sitemaps themselves must be on the seed's host (the sitemaps protocol),
        # unless the seed's robots.txt declares them (cross-submission).
        self._sitemap_scope = Scope(self.seed_host, port=port_of(requested_url(first)))
        #: Where pages may be requested; widened from settings in from_crawler.
        #: SiteRedirectMiddleware reads it for redirects.
        self.increcrawl_scope = self._sitemap_scope
        self._digest_salt = b""
        self.run: Run | None = None
        self.discovery_complete: bool | None = None
        self._closing = False  # closed for a Geonode failure: said once
        self._sources_read = 0  # sites the map read (sitemaps read are counted in the stats)
        self._roots: set[str] = set()  # the sitemaps given and found (always followed)
        self._rules = UrlRules()  # INCRECRAWL_ALLOW/DENY/SITEMAP_FOLLOW, set in from_crawler
        self._content: PageContent  # a page's text, size, soft 404s; set in from_crawler
        self._site_fetch: SiteFetch  # sitemaps and robots.txt; set in from_crawler
        self._progress: progress.Progress  # INCRECRAWL_PROGRESS_INTERVAL lines
        self._fetcher: Fetcher  # INCRECRAWL_FETCHER's (spiders/fetchers/); set in from_crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> IncrementalSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        keep_warnings(crawler)
        for warning in unknown_arguments(cls, kwargs):
            logger.warning(warning)
        config = spider.config = config_for(crawler)  # fail at start
        spider._rules = UrlRules.from_config(config)
        spider._progress = progress.Progress(crawler, config.progress_interval)
        spider.increcrawl_scope = spider._sitemap_scope.widened(config.include_subdomains)
        spider._site_fetch = SiteFetch(crawler, config.sitemap_max_bytes, spider._sitemap_scope)
        spider._content = PageContent.of(crawler, config, spider._origin, spider.increcrawl_scope)
        spider._digest_salt = digest_salt(
            spider.seed_host, spider._sitemap_scope.port, config, spider._rules
        )
        spider._fetcher = fetcher_for(spider._fetch_inputs(), spider.queue_chunk)
        return spider

    def _fetch_inputs(self) -> FetchInputs:
        return FetchInputs(
            crawler=self.crawler,
            config=self.config,
            page_request=self._page_request,
            ruled=lambda url: self._rule_callback(url) is not None,
            close=self._close,
            content=self._content,
            site_fetch=self._site_fetch,
            progress=self._progress,
            formats=formats_for(self.config, self),
        )

    # -- phases ----------------------------------------------------------------

    async def start(self) -> AsyncIterator[Any]:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return  # logged once; the crawl ends with database_in_use
        self.run = state.run
        self._fetcher.announce()
        if not await self._fetcher.open(state):
            return
        self._progress.start()
        await self._discovery_phase(state)
        if self.discover_only:
            return
        expected, chunks = await self._due_rows(state)
        async for output in self._fetch_due(expected, chunks):
            yield output

    async def _discovery_phase(self, state: CrawlState) -> None:
        if await compat.in_thread(state.store.claim_discovery, self.increcrawl_seed):
            try:
                await self._discover_and_judge(state.run, state)
            except stopped() as exc:
                self.discovery_complete = discovery_stopped(state, exc, self.crawler.stats)
            finally:
                await compat.in_thread(state.store.end_discovery, self.increcrawl_seed)
        else:  # one reader of a seed's sources at a time on a shared state
            logger.info(
                "Another crawl is reading the sources of %s: this one fetches the queue "
                "as it stands",
                self.increcrawl_seed,
            )
            stats.inc(self.crawler.stats, stats.DISCOVERY_ELSEWHERE)

    async def _due_rows(self, state: CrawlState) -> tuple[int, Iterator[list[PageState]]]:
        """How many rows this run fetches and their chunks; the fetcher's budget set."""
        fetcher = self._fetcher
        await share_if_shared(self.crawler, state.store, self.increcrawl_seed, fetcher.client)
        share = await fetcher.month_share(state.store)
        expected, chunks = await due_rows(
            self.crawler,
            state.store,
            self.increcrawl_seed,
            self.queue_chunk,
            share,
            free_answers=fetcher.free_answers,
        )
        # With no page due, no request for the site's "not found" page: the last verdict.
        await self._content.learn_not_found(ask=expected > 0)
        self._progress.enter(progress.FETCHING)
        stats.inc(self.crawler.stats, stats.DUE, expected)
        fetcher.budget(share)  # after the "not found" page: what it cost is spent
        return expected, chunks

    async def _fetch_due(
        self, expected: int, chunks: Iterator[list[PageState]]
    ) -> AsyncIterator[Any]:
        """Each chunk of due rows handed to the fetcher, read as the crawl drains the
        previous one: memory stays bounded whatever the size of the due set. Read off
        the reactor thread (10,000 rows take about 150 ms)."""
        fetcher, tokens = self._fetcher, self._fetcher.tokens
        while (chunk := await compat.in_thread(next, chunks, None)) is not None:
            if not chunk:  # a shared state: other workers hold what is left, for now
                await compat.sleep(SHARED_WAIT)
                continue
            due = without_excluded(chunk, self._rules, self._roots, self.crawler.stats)
            stats.inc(self.crawler.stats, stats.DUE, len(due) - len(chunk))
            expected -= len(chunk) - len(due)
            stats.inc(self.crawler.stats, stats.DUE_GONE, sum(page.gone for page in due))
            async for output in fetcher.fetch(due):
                yield output
            if fetcher.out_of_tokens:
                tokens.stop(expected - tokens.queued)
                return
            # The next chunk is read once most of this one is answered: the scheduler
            # and the queue's cache hold about one chunk, whatever the size of the due
            # set (Scrapy takes start() requests as fast as they come).
            while tokens.queued - tokens.answered > len(chunk) // 2:
                await compat.sleep(0.05)

    # -- discovery ---------------------------------------------------------------

    async def _discover(self, run: Run) -> bool:
        discoverer = Discoverer(self._discovery_inputs(), run)
        roots = await discoverer.roots()
        # Kept before the walk: a walk the state stops leaves them followed.
        self._roots, self._sources_read = set(roots.urls), roots.mapped
        return await discoverer.walk(roots)

    def _discovery_inputs(self) -> DiscoveryInputs:
        return DiscoveryInputs(
            sources=self.sources,
            fetch=self._site_fetch,
            sitemap_scope=self._sitemap_scope,
            page_scope=self.increcrawl_scope,
            config=self.config,
            rules=self._rules,
            digest_salt=self._digest_salt,
            origin=self._origin,
            stats=self.crawler.stats,
            client=self._fetcher.client,
            stop=self._close,
        )

    async def _discover_and_judge(self, run: Run, state: Any) -> None:
        self.discovery_complete = state.discovery_complete = await self._discover(run)
        if not self._sources_read and not self.crawler.stats.get_value(stats.SITEMAPS):
            logger.error(
                "No discovery source could be read (see the warnings above): the run "
                "fetches what was already due and ends with %s",
                close_reasons.DISCOVERY_FAILED,
            )
            state.failure = close_reasons.DISCOVERY_FAILED
        elif nothing_kept(self.crawler.stats, self._sitemap_scope):
            # Not the site's answer but a mismatch: its rows are not all missing.
            state.failure = close_reasons.NOTHING_DISCOVERED
            self.discovery_complete = state.discovery_complete = False
        await after_discovery(run, self.discovery_complete, self.crawler.stats)

    # -- fetching pages ----------------------------------------------------------

    def _page_request(self, page: PageState) -> Request:
        """*page*'s request as a direct fetch sends it (the fetcher shapes it)."""
        return Request(
            page.url,
            callback=self.parse_page,
            errback=self.page_failed,
            headers=conditions(page),
            dont_filter=True,
            meta={
                "handle_httpstatus_list": HANDLED_STATUSES,
                "download_maxsize": self.config.max_page_bytes,  # decompressed too
                META_URL: page.url,
                META_KEY: page.normalized_url,
                META_UNLISTED: page.missing_runs >= self.config.missing_runs,
            },
        )

    async def parse_page(self, response: scrapy.http.Response) -> Iterable[Any]:
        return await collected(self._fetcher.answered(response, self._page_outputs))

    async def _page_outputs(self, response: Any) -> AsyncIterator[Any]:
        self._fetcher.tokens.answer(1, tokens_of(response.meta.get(META_ANSWER)))
        row = row_of(response)
        final_url = final_url_of(response)
        if final_url is not None and not self.increcrawl_scope.follows_redirect(final_url):
            # The API followed a redirect to another site: not this page's content.
            stats.inc(self.crawler.stats, stats.REDIRECT_OFFSITE)
            logger.warning("%s redirects to another site (%s): not kept", response.url, final_url)
            yield {
                **row,
                "http_status": 0,
                "error": f"redirect to another site: {final_url}",
                "error_kind": OFFSITE,
                "site_failure": True,
            }
            return
        moved = await self._content.moved(response, row, final_url)
        if moved is not None:
            yield moved
            return
        callback = self._rule_callback(row["url"]) if response.status == 200 else None
        if callback is not None:
            for output in routed(self, callback, response, row["url"]):
                yield output
            return
        item = page_item(response, row, final_url)
        if response.status == 200:
            item = await self._content.with_text(item, response)
        yield await self._fetcher.item(response, item)

    def _rule_callback(self, url: str) -> Callable[..., Any] | None:
        """The subclass's callback for *url* (``page_rules``), or None: ours."""
        if self._page_rules is None:
            self._page_rules = compile_rules(self, self.page_rules)
        return next((cb for regex, cb in self._page_rules if regex.search(url)), None)

    async def page_failed(self, failure: Failure) -> AsyncIterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        instead = await self._fetcher.failed(failure)
        if instead is not None:  # a hybrid probe that got no answer: Geonode is asked
            yield instead
            return
        self._fetcher.tokens.answer()
        if type(failure.value) is IgnoreRequest and ROBOTS in failure.getErrorMessage():
            # RobotsTxtMiddleware's "Forbidden by robots.txt": not fetched, not an
            # error, not gone; the row stays as it is.
            stats.inc(self.crawler.stats, stats.SKIPPED, reason=ROBOTS)
            return
        if too_large(failure.value):  # a site failure (failure_kind), counted
            stats.inc(self.crawler.stats, stats.TOO_LARGE)
        yield failed_item(request, failure.value, failure.getErrorMessage())

    # -- closing -------------------------------------------------------------------

    def _close(self, reason: str, why: str) -> None:
        if self._closing:
            return
        self._closing = True
        logger.error("%s; closing the spider (%s)", why, reason)
        deferred_from_coro(compat.close_spider(self.crawler, reason))

    async def closed(self, reason: str) -> None:
        self._progress.stop()
        await self._fetcher.close()  # a batch job under way charges no more
