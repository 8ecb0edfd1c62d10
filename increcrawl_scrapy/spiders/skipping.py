"""Due rows the run does not fetch: those the URL rules now exclude, and (for batch
jobs, which do not pass through Scrapy's downloader middlewares) those the site's
robots.txt disallows. Skipped rows stay as they are: neither fetched nor missing.

Single page requests meet robots.txt in Scrapy's own ``RobotsTxtMiddleware``,
whoever fetches them (the Geonode middleware comes after it).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from protego import Protego

from increcrawl_scrapy import stats
from increcrawl_scrapy.discovery.url_rules import UrlRules
from increcrawl_scrapy.schedule.rows import ITEM_MARK, PageState

if TYPE_CHECKING:
    from scrapy.http import Response
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

EXCLUDED, ROBOTS = "excluded", "robots"


def without_excluded(
    pages: list[PageState], rules: UrlRules, roots: set[str], collector: StatsCollector | None
) -> list[PageState]:
    """*pages* less those *rules* refuse, or whose child sitemap they no longer
    follow (*roots*, the sitemaps given, are always followed), and less item rows
    (``INCRECRAWL_ITEM_KEY``: labels, recorded when their page is fetched; a state of
    an older version has them due)."""
    pages = [page for page in pages if ITEM_MARK not in page.normalized_url]
    if not rules.active and not rules.follow:
        return pages
    kept = [
        page
        for page in pages
        if not rules.refuses(page.url)
        and (not page.sitemap_url or page.sitemap_url in roots or rules.follows(page.sitemap_url))
    ]
    stats.inc(collector, stats.SKIPPED, len(pages) - len(kept), reason=EXCLUDED)
    return kept


async def robots_allowed(
    pages: list[PageState],
    fetch: Callable[[str], Awaitable[Response | None]],
    settings: BaseSettings,
    collector: StatsCollector | None,
    parsers: dict[str, Protego | None],
) -> list[PageState]:
    """*pages* less those robots.txt disallows, as ``RobotsTxtMiddleware`` judges
    (Protego; a robots.txt that cannot be read allows everything). *parsers* keeps
    each origin's robots.txt for the run, read once whatever the number of chunks."""
    if not pages or not settings.getbool("ROBOTSTXT_OBEY"):
        return pages
    agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT") or "*"
    kept = []
    for page in pages:
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(page.url))
        if origin not in parsers:
            response = await fetch(f"{origin}/robots.txt")
            ok = response is not None and response.status == 200
            parsers[origin] = Protego.parse(response.text) if ok and response else None
        parser = parsers[origin]
        if parser is None or parser.can_fetch(page.url, agent):
            kept.append(page)
    if len(kept) < len(pages):
        logger.info("%d due pages disallowed by robots.txt are not fetched", len(pages) - len(kept))
        stats.inc(collector, stats.SKIPPED, len(pages) - len(kept), reason=ROBOTS)
    return kept
