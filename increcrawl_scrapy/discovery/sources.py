"""Where a run's URLs come from: the sources the spider was given (sitemaps, feeds,
robots.txt files, a site), read into the run by ``SitemapWalk`` or the Geonode map.

A site (``-a site_url``) is searched the way search engines and
ultimate-sitemap-parser do: its robots.txt ``Sitemap:`` lines, then a bounded list
of well-known paths; the Geonode map (with a key) is the fallback for a site with
none of them.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.discovery.parse import (
    PARSER_VERSION,
    SitemapError,
    SitemapStats,
    decompress,
    iter_sitemap,
)
from increcrawl_scrapy.discovery.walk import SitemapWalk
from increcrawl_scrapy.geonode.errors import GeonodeError, GeonodeFatalError
from increcrawl_scrapy.scope import UrlRefused, request_target
from increcrawl_scrapy.urls import RULES_VERSION, normalization_settings, normalize_url

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.discovery.url_rules import UrlRules
    from increcrawl_scrapy.geonode.client import GeonodeClient
    from increcrawl_scrapy.scope import Scope
    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)

#: Source arguments of the spider; each may hold several URLs, comma-separated.
SOURCES = ("sitemap_url", "feed_url", "robots_url", "site_url")

ARGUMENTS = "-a sitemap_url=URL, -a feed_url=URL, -a robots_url=URL or -a site_url=URL"
#: Where sites keep sitemaps and feeds when robots.txt does not say (tried in order).
WELL_KNOWN = (
    "/sitemap.xml",
    "/sitemap_index.xml",
    "/sitemap-index.xml",
    "/sitemap.xml.gz",
    "/sitemap.txt",
    "/feed/",
    "/rss.xml",
    "/atom.xml",
    "/feed.xml",
    "/index.xml",
)
#: The sitemaps among them (not feeds).
WELL_KNOWN_SITEMAPS = tuple(path for path in WELL_KNOWN if "sitemap" in path)
# Between two URLs of one argument: a comma before the next scheme.
_SEPARATOR = re.compile(r"\s*,\s*(?=https?://)", re.IGNORECASE)


def parse_sources(**arguments: str | None) -> dict[str, list[tuple[str, str]]]:
    """The spider's source arguments as ``name -> [(URL as requested, host)]``;
    ValueError, naming the argument, if one is unusable."""
    sources: dict[str, list[tuple[str, str]]] = {}
    for name in SOURCES:
        value = (arguments.get(name) or "").strip()
        if not value:
            continue
        for part in _SEPARATOR.split(value):
            try:
                target = request_target(part.strip())
                normalize_url(target[0])
            except (UrlRefused, ValueError) as exc:
                raise ValueError(f"-a {name}: not a URL to crawl ({exc})") from None
            sources.setdefault(name, []).append(target)
    if not sources:
        raise ValueError(f"the incremental spider needs one of {ARGUMENTS}")
    return sources


def digest_salt(
    seed_host: str, port: int | None, config: IncrecrawlConfig, rules: UrlRules
) -> bytes:
    """Whatever changes what a sitemap yields: an identical sitemap read under other
    settings must be applied again (the walk's validators are kept under it)."""
    return json.dumps(
        {
            "scope": [seed_host, config.include_subdomains, port],
            "normalization": normalization_settings(config),
            "rules": RULES_VERSION,
            "parser": PARSER_VERSION,
            "url_rules": rules.digest_part().decode(),
        },
        sort_keys=True,
    ).encode()


@dataclass(frozen=True)
class DiscoveryInputs:
    """What one run's discovery reads: the spider builds it (``_discovery_inputs``)."""

    sources: Mapping[str, Sequence[tuple[str, str]]]  # parse_sources' answer
    #: A sitemap, feed or robots.txt straight from the site: ``fetch(url, headers)``.
    fetch: Callable[[str, dict[str, str] | None], Awaitable[Response | None]]
    sitemap_scope: Scope  # where sitemaps may be (the seed's host)
    page_scope: Scope  # where pages may be
    config: IncrecrawlConfig
    rules: UrlRules  # INCRECRAWL_ALLOW / DENY / SITEMAP_FOLLOW
    digest_salt: bytes  # what else changes what a sitemap yields
    origin: str  # scheme://host[:port] of the seed
    stats: StatsCollector | None
    client: GeonodeClient | None  # the Geonode map, when pages go through Geonode
    stop: Callable[[str, str], None]  # closes the crawl: ``stop(reason, why)``


#: WordPress's core sitemap (5.5 and later), which dates no page before 6.5.
WORDPRESS_SITEMAP = "/wp-sitemap.xml"
#: Its feed of the ten last edited posts, each dated by its last edit: a public query
#: of WordPress's own (not linked from its pages).
WORDPRESS_FEED = "/feed/atom/?orderby=modified"


@dataclass(frozen=True)
class Roots:
    """Where a run's walk starts: the sitemaps and feeds given and found."""

    urls: tuple[str, ...]
    complete: bool  # every site and robots.txt given could be read
    mapped: int  # sites the Geonode map read instead (their pages are in the run)
    #: Read when they answer, their failure no gap in discovery: signals, not sources.
    signals: tuple[str, ...] = ()


def wordpress_feeds(roots: Sequence[str]) -> tuple[str, ...]:
    """The feed of last edits of each WordPress site whose core sitemap is a root:
    its dates are the edits its sitemap does not date (#52)."""
    feeds = []
    for url in roots:
        parts = urlsplit(url)
        feed = f"{parts.scheme}://{parts.netloc}{WORDPRESS_FEED}"
        if parts.path == WORDPRESS_SITEMAP and feed not in roots and feed not in feeds:
            feeds.append(feed)
    return tuple(feeds)


class Discoverer:
    """One run's discovery: :meth:`roots` finds the sitemaps and feeds, :meth:`walk`
    reads them into the run. Two steps, so the spider keeps the roots even when the
    state stops the walk (they are always followed)."""

    def __init__(self, inputs: DiscoveryInputs, run: Run) -> None:
        self.inputs = inputs
        self.run = run
        self.stats = inputs.stats
        self._mapped = 0
        self.walker = SitemapWalk(
            run,
            inputs.fetch,
            sitemap_scope=inputs.sitemap_scope,
            page_scope=inputs.page_scope,
            config=inputs.config,
            digest_salt=inputs.digest_salt,
            origin=inputs.origin,
            crawler_stats=self.stats,
            rules=inputs.rules,
        )

    async def roots(self) -> Roots:
        """The sources given, with what their sites and robots.txt files list."""
        sources = self.inputs.sources
        complete = True
        roots: list[str] = []
        for site_url, _host in sources.get("site_url", []):
            found = await self._site(site_url)
            complete = complete and found is not None
            roots += found or []
        for robots_url, _host in sources.get("robots_url", []):
            found = await self.walker.robots(robots_url)
            complete = complete and bool(found)
            roots += found or []
        roots += [url for name in ("sitemap_url", "feed_url") for url, _ in sources.get(name, [])]
        signals = wordpress_feeds(roots) if self.inputs.config.wordpress_feed else ()
        return Roots(tuple(roots), complete, self._mapped, signals)

    async def walk(self, roots: Roots) -> bool:
        """Read *roots* into the run; discovery is complete only if every source was
        (its signals aside: a site may turn its feeds off)."""
        complete = await self.walker.walk(list(roots.urls)) and roots.complete
        if roots.signals:
            await self.walker.walk(list(roots.signals), signals=True)
        for seed, count in sorted(self.run.taken_over.items()):
            logger.warning(
                "%d pages listed under seed %s now belong to seed %s (its sources list "
                "them too); give -a seed=%s to keep them under the old name",
                count,
                seed,
                self.run.seed,
                seed,
            )
        return complete

    async def _site(self, site_url: str) -> list[str] | None:
        """The sitemaps and feeds of a site; [] when the map read it instead, None
        when nothing could be read."""
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(site_url))
        declared = await self.walker.robots(f"{origin}/robots.txt") or []
        if declared:
            logger.info("Sitemaps of %s, from its robots.txt: %s", site_url, ", ".join(declared))
        # A sitemap at a well-known path is read too when robots.txt names others
        # (as ultimate-sitemap-parser does); feeds only when there is no sitemap.
        paths = WELL_KNOWN_SITEMAPS if declared else WELL_KNOWN
        candidates = [origin + path for path in paths if origin + path not in declared]
        found = [url for url in candidates if await self._probe(url)]
        if found:
            logger.info("Sitemaps of %s, at well-known paths: %s", site_url, ", ".join(found))
        if declared or found:
            return declared + found
        if self.inputs.client is not None:
            logger.info(
                "%s lists no sitemap or feed: discovering it with the Geonode map", site_url
            )
            return [] if await self._map(site_url) else None
        logger.error(
            "No sitemap or feed found for %s (robots.txt Sitemap: lines, %s): give "
            "-a sitemap_url, or set GEONODE_API_KEY to discover it with the Geonode map",
            site_url,
            ", ".join(WELL_KNOWN),
        )
        return None

    async def _probe(self, url: str) -> bool:
        """Whether *url* answers with a sitemap or a feed (not a soft 404 page)."""
        response = await self.inputs.fetch(url, None)
        if response is None or response.status != 200:
            return False
        try:
            body = decompress(response.body, self.inputs.config.sitemap_max_bytes)
            return await compat.in_thread(_readable, body)
        except SitemapError:
            return False

    async def _map(self, site_url: str) -> bool:
        client = self.inputs.client
        assert client is not None
        try:
            links = await client.map(site_url)
        except GeonodeFatalError as exc:
            self.inputs.stop(exc.reason, str(exc))
            return False
        except GeonodeError as exc:
            logger.warning("Geonode map of %s failed: %s", site_url, exc)
            stats.inc(self.stats, stats.MAP_ERRORS)
            return False
        skipped: Counter[str] = Counter()
        kept: list[tuple[str, str | None]] = []
        rules = self.inputs.rules
        for link in links:
            requested = self.inputs.page_scope.request_url(link, skipped)
            if requested is not None:
                refused = rules.refuses(requested)
                if refused:
                    skipped[refused] += 1
                    continue
                kept.append((requested, None))
        for reason, count in skipped.items():
            stats.inc(self.stats, stats.MAP_SKIPPED, count, reason=reason)
        stats.inc(self.stats, stats.DISCOVERED, await compat.in_thread(self.run.upsert, kept))
        self._mapped += 1
        return True


def _readable(body: bytes) -> bool:
    try:
        next(iter_sitemap(body, SitemapStats()), None)
    except SitemapError:
        return False
    return True
