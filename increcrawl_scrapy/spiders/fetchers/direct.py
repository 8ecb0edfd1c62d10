"""Pages fetched by Scrapy itself (``INCRECRAWL_FETCHER = "direct"``, or ``auto``
without a key): one request per due page, nothing to pay."""

from __future__ import annotations

import logging

from increcrawl_scrapy.spiders.fetchers.base import Fetcher

logger = logging.getLogger(__name__)


class DirectFetcher(Fetcher):
    kind = "direct"

    def announce(self) -> None:
        logger.info(
            "Fetching pages directly with Scrapy (INCRECRAWL_FETCHER=%s, %s)",
            self.config.fetcher,
            "no GEONODE_API_KEY" if not self.config.api_key else "key set",
        )
