"""Where a run's URLs come from: the sources the spider was given (sitemaps, feeds,
robots.txt files, a site), read into the run by ``SitemapWalk`` or the Geonode map.

A site (``-a site_url``) is searched the way search engines and
ultimate-sitemap-parser do: its robots.txt ``Sitemap:`` lines, then a bounded list
of well-known paths; the Geonode map (with a key) is the fallback for a site with
none of them.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.crawl.arguments import SOURCES
from increcrawl_scrapy.discovery.parse import SitemapError, SitemapStats, decompress, iter_sitemap
from increcrawl_scrapy.discovery.walk import SitemapWalk
from increcrawl_scrapy.geonode.errors import GeonodeError, GeonodeFatalError
from increcrawl_scrapy.scope import UrlRefused, request_target
from increcrawl_scrapy.urls import normalize_url

if TYPE_CHECKING:
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider
    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)

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


class Discoverer:
    """One run's discovery for the spider (its sources, scopes and fetcher)."""

    def __init__(self, spider: IncrementalSpider, run: Run) -> None:
        self.spider = spider
        self.run = run
        self.stats = spider.crawler.stats
        self.walk = SitemapWalk(
            run,
            spider._fetch,
            sitemap_scope=spider._sitemap_scope,
            page_scope=spider.increcrawl_scope,
            config=spider.config,
            digest_salt=spider._digest_salt,
            origin=spider._origin,
            crawler_stats=self.stats,
            rules=spider._rules,
        )

    async def discover(self) -> bool:
        """Read every source given; discovery is complete only if all of them were."""
        sources = self.spider.sources
        complete = True
        roots: list[str] = []
        for site_url, _host in sources.get("site_url", []):
            found = await self._site(site_url)
            complete = complete and found is not None
            roots += found or []
        for robots_url, _host in sources.get("robots_url", []):
            found = await self.walk.robots(robots_url)
            complete = complete and bool(found)
            roots += found or []
        roots += [url for name in ("sitemap_url", "feed_url") for url, _ in sources.get(name, [])]
        self.spider._roots = set(roots)
        complete = await self.walk.walk(roots) and complete
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
        declared = await self.walk.robots(f"{origin}/robots.txt") or []
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
        if self.spider._client is not None:
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
        response = await self.spider._fetch(url)
        if response is None or response.status != 200:
            return False
        try:
            body = decompress(response.body, self.spider.config.sitemap_max_bytes)
            return await compat.in_thread(_readable, body)
        except SitemapError:
            return False

    async def _map(self, site_url: str) -> bool:
        client = self.spider._client
        assert client is not None
        try:
            links = await client.map(site_url)
        except GeonodeFatalError as exc:
            self.spider._close(exc.reason, str(exc))
            return False
        except GeonodeError as exc:
            logger.warning("Geonode map of %s failed: %s", site_url, exc)
            stats.inc(self.stats, stats.MAP_ERRORS)
            return False
        skipped: Counter[str] = Counter()
        kept: list[tuple[str, str | None]] = []
        rules = self.walk.rules
        for link in links:
            requested = self.spider.increcrawl_scope.request_url(link, skipped)
            if requested is not None:
                refused = rules.refuses(requested)
                if refused:
                    skipped[refused] += 1
                    continue
                kept.append((requested, None))
        for reason, count in skipped.items():
            stats.inc(self.stats, stats.MAP_SKIPPED, count, reason=reason)
        stats.inc(self.stats, stats.DISCOVERED, await compat.in_thread(self.run.upsert, kept))
        self.spider._sources_read += 1
        return True


def _readable(body: bytes) -> bool:
    try:
        next(iter_sitemap(body, SitemapStats()), None)
    except SitemapError:
        return False
    return True
