"""Scrapy's HTTP cache under the add-on: a cached answer is not a fetch.

With ``HTTPCACHE_ENABLED`` (common while a project is developed) Scrapy answers
from its cache what it has seen before: the add-on recorded those old answers as
fetches, unchanged, lengthened the pages' intervals on content nobody read again,
and delivered no edit of the site. So a project's spider's requests bypass the
cache (``dont_cache``, which ``HttpCacheMiddleware`` honours: neither read nor
filled): every page is asked of the site, and a page with state conditionally
(its ``If-None-Match`` / ``If-Modified-Since``), with or without
``INCRECRAWL_SKIP_NOT_DUE`` (``skip_not_due.py``); listings too, or a page added
to the site would never be found. A request whose meta sets ``dont_cache`` itself
keeps it. The crawl says so when it starts. An answer that still comes from the
cache (a cache placed before the add-on's middleware, which it then never sees,
or ``dont_cache = False``) is never recorded: its items are delivered as they are,
without state (``pages/middleware.py``), and a cache placed so is said at the start
to hide the site's changes.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.downloadermiddlewares.httpcache import HttpCacheMiddleware

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: The flag HttpCacheMiddleware sets on the answers it takes from its cache.
CACHED = "cached"


def bypass(request: Request) -> None:
    """Neither read nor fill Scrapy's cache for *request* (unless its meta says)."""
    request.meta.setdefault("dont_cache", True)


def is_cached(response: Response) -> bool:
    return CACHED in response.flags


def say(crawler: Crawler, ours: Any) -> None:
    """Once, at the start: what the add-on does with the cache, and whether a cache
    answers before *ours* (the add-on's downloader middleware) sees the requests."""
    engine = crawler.engine
    chain = list(engine.downloader.middleware.middlewares) if engine is not None else []
    caches = [m for m in chain if isinstance(m, HttpCacheMiddleware)]
    before = [m for m in caches if ours in chain and chain.index(m) < chain.index(ours)]
    if before:
        logger.warning(
            "Scrapy's HTTP cache (%s) answers before the add-on's %s sees the "
            "requests: the site's changes cannot be seen, and what the cache answers is "
            "not recorded (its items are delivered as they are, without state). Place "
            "the HTTP cache after it in DOWNLOADER_MIDDLEWARES, or set "
            "HTTPCACHE_ENABLED = False",
            type(before[0]).__name__,
            type(ours).__name__,
        )
    elif caches:
        logger.info(
            "Scrapy's HTTP cache is on (HTTPCACHE_ENABLED): a cached answer is not a "
            "fetch, so this crawl's requests neither read nor fill it (dont_cache): "
            "every page is asked of the site, a page with state conditionally"
        )
