"""One state store per crawl, shared by the spider and the pipeline.

Both need the same SQLite connection (results buffered by the pipeline must be
visible to the spider's queue), so the store is opened once per crawler, on first
use, and closed on ``spider_closed`` after every other handler connected earlier.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from scrapy import signals

from increcrawl_scrapy.config import IncrecrawlConfig
from increcrawl_scrapy.state import StateStore

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_STORES: WeakKeyDictionary[Crawler, StateStore] = WeakKeyDictionary()


def store_for(crawler: Crawler) -> StateStore:
    """The crawl's state store, opened (with the crawl lock) on first call."""
    store = _STORES.get(crawler)
    if store is None:
        config = IncrecrawlConfig.from_settings(crawler.settings)
        path = os.path.abspath(config.db_path)
        if path != config.db_path:
            # Under Scrapyd the working directory is Scrapyd's, not the project's.
            logger.info("INCRECRAWL_DB %r resolved to %s", config.db_path, path)
        store = StateStore.from_config(config, exclusive=True)
        _STORES[crawler] = store

        def close(crawler: Crawler = crawler) -> None:
            closing = _STORES.pop(crawler, None)
            if closing is not None:
                closing.close()

        crawler.signals.connect(close, signal=signals.spider_closed, weak=False)
    return store


def seed_of(crawler: Crawler) -> str:
    """The seed a crawl's rows belong to: the incremental spider's sitemap or site,
    or the spider's name for an embedding project's own spiders."""
    spider = crawler.spider
    seed = getattr(spider, "increcrawl_seed", None)
    return str(seed or (spider.name if spider is not None else "default"))
