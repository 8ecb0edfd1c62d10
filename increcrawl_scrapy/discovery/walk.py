"""Reading a seed's sitemaps: breadth first, the next download under way while one
is parsed, every URL judged by scope, everything upserted as it streams.

The spider hands over the sources and gets back whether discovery was complete;
parsing itself lives in ``parse.py``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.discovery.parse import (
    SitemapError,
    SitemapStats,
    decompress,
    iter_sitemap,
    robots_sitemaps,
)
from increcrawl_scrapy.discovery.url_rules import UrlRules
from increcrawl_scrapy.scope import Scope, UrlRefused, is_ip_literal, request_target

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.state import Run, Validators

logger = logging.getLogger(__name__)

#: SitemapStats.kind of a document already read this walk, then its first URL.
DUPLICATE = "duplicate of "
UPSERT_CHUNK = 10_000  # one transaction each: large chunks, few commits


@dataclass
class Ingested:
    """What reading one sitemap gave."""

    stats: SitemapStats
    children: list[str] = field(default_factory=list)
    recorded: int = 0
    read: int = 0  # URLs handed to the store (recorded unless they cannot be keyed)
    complete: bool = True  # False when a recovered document ended early
    #: Its last writes, still in the writer's hands when parsing ended.
    tail: list[Future[Any]] = field(default_factory=list)


class SitemapWalk:
    def __init__(
        self,
        run: Run,
        fetch: Callable[[str, dict[str, str] | None], Awaitable[Response | None]],
        *,
        sitemap_scope: Scope,
        page_scope: Scope,
        config: IncrecrawlConfig,
        digest_salt: bytes,
        origin: str,
        crawler_stats: StatsCollector | None,
        rules: UrlRules | None = None,
    ) -> None:
        self.run = run
        self.fetch = fetch
        self.sitemap_scope = sitemap_scope
        self.page_scope = page_scope
        self.config = config
        self.digest_salt = digest_salt
        # Validators are sent only for sitemaps read under these very settings.
        self.origin = origin  # scheme://host[:port] of the seed
        self.stats = crawler_stats
        self.declared: set[str] | None = None  # Sitemap: lines of the seed's robots.txt
        self.rules = rules or UrlRules()
        # Chunks are written on a thread of their own, one behind the parser: SQLite
        # works without the GIL, so the next chunk is parsed while one is written.
        self._writer: ThreadPoolExecutor | None = None
        self._tails: deque[Ingested] = deque()  # read, not yet counted
        self._digests: dict[str, str] = {}  # documents read this walk -> their first URL
        self._repeats = 0  # rows listed again (Run.repeated) already counted
        self._signals = False  # this walk reads feeds for their dates only

    # -- robots.txt ----------------------------------------------------------------

    async def robots(self, url: str) -> list[str] | None:
        """The ``Sitemap:`` URLs of a robots.txt as they will be requested, or None
        when it cannot be read. Those of the seed's own robots.txt are remembered:
        they may be on another host (cross-submission)."""
        response = await self.fetch(url, None)
        if response is None or response.status != 200:
            stats.inc(self.stats, stats.ROBOTS_ERRORS)
            logger.warning("Could not read %s", url)
            return None
        found = []
        for line in robots_sitemaps(response.body):
            try:
                sitemap, host = request_target(line)
            except UrlRefused as refused:
                stats.inc(self.stats, stats.SITEMAP_SKIPPED, reason=refused.reason)
                continue
            if not self.sitemap_scope.covers(host) and is_ip_literal(host):
                # Cross-submission is for sitemaps on a CDN or storage host, which
                # have names; an address is where internal services live.
                logger.warning("%s: Sitemap: %s on an IP address is not read", url, sitemap)
                stats.inc(self.stats, stats.SITEMAP_SKIPPED, reason="ip_host")
                continue
            found.append(sitemap)
        if not found:
            logger.warning("%s has no usable Sitemap: lines", url)
        if url == f"{self.origin}/robots.txt":
            self.declared = set(found)
        return found

    async def _declared_by_robots(self, url: str) -> bool:
        """Whether the seed's own robots.txt lists *url* (read once, when needed)."""
        if self.declared is None:
            self.declared = set(await self.robots(f"{self.origin}/robots.txt") or ())
        return url in self.declared

    # -- sitemaps ------------------------------------------------------------------

    async def walk(self, roots: list[str], signals: bool = False) -> bool:
        """Read *roots* and every child they list; whether all were read whole.
        *signals*: feeds read for their dates only, their failure said quietly."""
        self._signals = signals
        self._writer = ThreadPoolExecutor(1, thread_name_prefix="increcrawl-upsert")
        try:
            complete = await self._walk(roots)
            while self._tails:  # every write done before discovery is judged
                await compat.in_thread(wait, self._tails[0].tail)
                self._count(self._tails.popleft())
            return complete
        finally:
            # Waits for writes still queued after an error: off the reactor thread.
            await compat.in_thread(self._writer.shutdown)

    async def _walk(self, roots: list[str]) -> bool:
        complete = True
        queue = deque((url, 0) for url in roots)
        visited: set[str] = set()

        async def next_fetch() -> tuple[tuple[str, int], Any] | None:
            nonlocal complete
            taken, ok = await self._take(queue, visited)
            complete &= ok
            if taken is None:
                return None
            # Each step of the run's state off the reactor's thread (a database may
            # be a round trip away).
            conditions = await compat.in_thread(
                self.run.sitemap_conditions, taken[0], self.settings
            )
            return taken, deferred_from_coro(self.fetch(taken[0], conditions))

        pending = await next_fetch()
        while pending is not None:
            (url, depth), fetching = pending
            response = await maybe_deferred_to_future(fetching)
            pending = await next_fetch()  # downloads while this one is parsed
            ingested = await self._read(url, response)
            if ingested is None or not ingested.complete:
                complete = False
            if ingested is None:
                continue
            queue.extend((child, depth + 1) for child in ingested.children)
            if pending is None:  # an index's children were not known a moment ago
                pending = await next_fetch()
        return complete

    async def _take(
        self, queue: deque[tuple[str, int]], visited: set[str]
    ) -> tuple[tuple[str, int] | None, bool]:
        """The next sitemap worth fetching, and whether every one skipped on the way
        was skipped harmlessly (a repeat) rather than refused."""
        ok = True
        while queue:
            loc, depth = queue.popleft()
            if loc in visited:
                stats.inc(self.stats, stats.SITEMAP_REPEATED)
                continue
            visited.add(loc)
            if depth > self.config.sitemap_max_depth:
                logger.warning(
                    "Sitemap %s nests deeper than INCRECRAWL_SITEMAP_MAX_DEPTH=%d",
                    loc,
                    self.config.sitemap_max_depth,
                )
                stats.inc(self.stats, stats.SITEMAP_TOO_DEEP)
                ok = False
                continue
            if depth == 0:
                return (loc, depth), ok  # given by the user or the seed's robots.txt
            if not self.rules.follows(loc):
                # Left out on purpose: its rows are neither fetched nor missing.
                stats.inc(self.stats, stats.SITEMAP_NOT_FOLLOWED)
                await compat.in_thread(self.run.sitemap_not_modified, loc)
                continue
            url = await self._child_url(loc)
            if url is None:
                logger.warning(
                    "Child sitemap %s is not on %s (nor declared by its robots.txt): "
                    "not read, discovery is incomplete",
                    loc[:200],
                    self.sitemap_scope.host,
                )
                stats.inc(self.stats, stats.SITEMAP_OFFSITE)
                ok = False
                continue
            return (url, depth), ok
        return None, ok

    async def _child_url(self, loc: str) -> str | None:
        skipped: Counter[str] = Counter()
        url = self.sitemap_scope.request_url(loc, skipped)
        if url is None and "offsite" in skipped:
            url = request_target(loc)[0]
            if not await self._declared_by_robots(url):
                return None
        return url

    async def _read(self, url: str, response: Response | None) -> Ingested | None:
        """Apply one downloaded sitemap; None (with a warning) if it is unusable."""
        if response is not None and response.status == 304 and _conditional(response):
            # Not modified since the last whole read under these settings.
            await compat.in_thread(self.run.sitemap_not_modified, url)
            stats.inc(self.stats, stats.SITEMAPS)
            stats.inc(self.stats, stats.SITEMAP_UNCHANGED)
            stats.inc(self.stats, stats.SITEMAP_NOT_MODIFIED)
            return Ingested(SitemapStats(kind="unchanged"))
        if response is None or response.status != 200:
            status = response.status if response is not None else "no answer"
            if self._signals:  # a site's feeds turned off: its sitemaps still tell all
                logger.info("Feed %s failed (%s): read without its dates", url, status)
                return None
            logger.warning("Sitemap %s failed (%s): discovery is incomplete", url, status)
            stats.inc(self.stats, stats.SITEMAP_ERRORS)
            return None
        try:
            ingested = await compat.in_thread(
                self._ingest, url, response.body, _validators(response)
            )
        except SitemapError as exc:
            if self._signals:
                logger.info("Feed %s is unusable (%s): read without its dates", url, exc)
                return None
            logger.warning("Sitemap %s is unusable: %s", url, exc)
            stats.inc(self.stats, stats.SITEMAP_INVALID)
            return None
        if ingested.stats.kind.startswith(DUPLICATE):
            twin = ingested.stats.kind[len(DUPLICATE) :]
            logger.info("Sitemap %s is the same document as %s: read once", url, twin)
            stats.inc(self.stats, stats.SITEMAP_DUPLICATE)
            return ingested
        stats.inc(self.stats, stats.SITEMAPS)
        if ingested.stats.kind == "feed":
            stats.inc(self.stats, stats.SITEMAP_FEEDS)
        if ingested.stats.recovered and self._signals:  # its dates only: nothing is missed
            logger.info(
                "Feed %s is not well-formed XML: %d entries' dates read the forgiving way",
                url,
                ingested.stats.entries,
            )
        elif ingested.stats.recovered:
            stats.inc(self.stats, stats.SITEMAP_RECOVERED)
            logger.warning(
                "Sitemap %s is not well-formed XML: read the forgiving way, %d entries kept%s",
                url,
                ingested.stats.entries,
                "; it ends early, so discovery is incomplete" if not ingested.complete else "",
            )
        if ingested.stats.kind == "unchanged":
            stats.inc(self.stats, stats.SITEMAP_UNCHANGED)
        for reason, count in ingested.stats.skipped.items():
            stats.inc(self.stats, stats.SITEMAP_SKIPPED, count, reason=reason)
        self._tails.append(ingested)
        while self._tails and all(future.done() for future in self._tails[0].tail):
            self._count(self._tails.popleft())
        return ingested

    def _count(self, ingested: Ingested) -> None:
        """Count a sitemap's URLs once its last writes are done (raising their error)."""
        for future in ingested.tail:
            ingested.recorded += future.result() or 0
        if self._signals:
            return  # a signal's entries are no URLs of the run
        # Distinct URLs: a row another sitemap of the run listed first is counted there.
        repeats, self._repeats = self.run.repeated - self._repeats, self.run.repeated
        stats.inc(self.stats, stats.DISCOVERED, ingested.recorded - repeats)
        stats.inc(self.stats, stats.INVALID_URLS, ingested.read - ingested.recorded)

    @property
    def settings(self) -> str:
        """What the sitemaps' validators are kept under: sent only for a sitemap read
        under these very settings and hosts (read whole before the seed's redirect to
        ``www.`` was known, all its pages refused, it is read again)."""
        return hashlib.sha256(self._salt()).hexdigest()[:32]

    def _salt(self) -> bytes:
        """What else changes what a sitemap yields, with the hosts the seed's redirects
        named (a sitemap read whole before they were known is read again)."""
        named = self.page_scope.named
        if len(named) == 1:
            return self.digest_salt
        return self.digest_salt + ("|" + ",".join(sorted(named))).encode()

    def _ingest(self, url: str, body: bytes, validators: Validators) -> Ingested:
        """Parse one sitemap and upsert its URLs as they stream (in a worker thread)."""
        ingested = Ingested(SitemapStats())
        sitemap_stats = ingested.stats
        xml = decompress(body, self.config.sitemap_max_bytes)
        digest = hashlib.sha256(self._salt() + xml).hexdigest()
        twin = self._digests.setdefault(digest, url)
        if twin != url:  # the same document under another name: read once
            sitemap_stats.kind = f"{DUPLICATE}{twin}"
            return ingested
        if self.run.sitemap_unchanged(url, digest, validators):
            sitemap_stats.kind = "unchanged"  # read whole last time and identical
            return ingested
        batch: list[tuple[str, str | None]] = []
        excluded: list[str] = []
        writing: Future[int] | None = None
        writer = self._writer
        assert writer is not None, "_ingest runs within walk()"

        def written() -> None:
            nonlocal writing
            if writing is not None:
                ingested.recorded += writing.result()
                writing = None

        def upsert() -> None:
            nonlocal batch, excluded, writing
            written()  # at most one chunk in the writer's hands: memory stays bounded
            feed = sitemap_stats.kind == "feed"
            writing = writer.submit(self._write, url, batch, excluded, feed)
            ingested.read += len(batch)
            batch, excluded = [], []

        rules = self.rules if self.rules.active else None
        alternates = self.config.sitemap_alternates
        try:
            for entry in iter_sitemap(xml, sitemap_stats):
                if sitemap_stats.kind == "sitemapindex":
                    ingested.children.append(entry.loc)  # judged when taken
                    continue
                if entry.alternate and not alternates:
                    continue
                requested = self.page_scope.request_url(entry.loc, sitemap_stats.skipped)
                if requested is None:
                    continue
                refused = rules.refuses(requested) if rules is not None else None
                if refused:
                    sitemap_stats.skipped[refused] += 1
                    excluded.append(requested)
                    continue
                batch.append((requested, entry.lastmod))
                if len(batch) >= UPSERT_CHUNK:
                    upsert()
        except BaseException:
            # What was read before a syntax error still counts as seen.
            upsert()
            written()
            raise
        upsert()
        ingested.complete = not sitemap_stats.truncated
        # The last chunk and the sitemap's digest are written behind the parser too
        # (the writer keeps their order): the next sitemap is parsed meanwhile.
        last = writing
        assert last is not None  # upsert() just handed it over
        ingested.tail.append(last)
        if sitemap_stats.kind in ("urlset", "feed") and ingested.complete:
            read_whole = (url, digest, validators, sitemap_stats.kind == "feed")
            ingested.tail.append(writer.submit(self._read_whole, last, *read_whole))
        return ingested

    def _read_whole(
        self, last: Future[int], url: str, digest: str, validators: Validators, feed: bool
    ) -> None:
        # Only if its last chunk was written (the writer ran it just before); a
        # signal's is no sitemap of the state (read whole each run, it lists nothing).
        if last.exception() is None and not self._signals:
            self.run.sitemap_read(url, digest, validators, self.settings, feed=feed)

    def _write(
        self, url: str, batch: list[tuple[str, str | None]], excluded: list[str], feed: bool
    ) -> int:
        if self._signals:
            return self.run.upsert(batch, sitemap_url=url, feed=feed, signal=True)
        recorded = self.run.upsert(batch, sitemap_url=url, feed=feed)
        self.run.seen_only(excluded)
        return recorded


def _conditional(response: Response) -> bool:
    """Whether the request carried validators (a 304 to anything else is an error)."""
    headers = response.request.headers if response.request is not None else {}
    return bool(headers.get("If-None-Match") or headers.get("If-Modified-Since"))


def _validators(response: Response) -> Validators:
    def header(name: str) -> str | None:
        value = response.headers.get(name)
        return value.decode("latin-1") if value else None

    return header("ETag"), header("Last-Modified")
