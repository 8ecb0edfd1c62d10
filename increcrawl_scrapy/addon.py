"""``increcrawl_scrapy.Addon``: install the middleware and the pipeline in one line.

    ADDONS = {"increcrawl_scrapy.Addon": 300}

A project's own middlewares, pipelines and download handlers stay as they are;
our components are only added where the project has not placed them itself, and
the middleware only when pages are fetched through Geonode (a key is set).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

MIDDLEWARE_PRIORITY = 1000  # after Scrapy's own, next to the download handler
PIPELINE_PRIORITY = 300


class Addon:
    def update_settings(self, settings: BaseSettings) -> None:
        from increcrawl_scrapy.config import config_for
        from increcrawl_scrapy.geonode import GeonodeExtractMiddleware
        from increcrawl_scrapy.pages.middleware import PRIORITY as ITEMS_PRIORITY
        from increcrawl_scrapy.pages.middleware import PageItemsMiddleware
        from increcrawl_scrapy.pages.skip_not_due import PRIORITY as SKIP_PRIORITY
        from increcrawl_scrapy.pages.skip_not_due import SkipNotDueMiddleware
        from increcrawl_scrapy.pipelines import IncrementalStatePipeline
        from increcrawl_scrapy.redirects import PRIORITY, SiteRedirectMiddleware

        # Validates every setting now, so a bad value stops the crawl before it starts
        # (no crawler here yet: the settings as they are being built).
        if config_for(settings).uses_geonode:
            settings.setdefault_in_component_priority_dict(
                "DOWNLOADER_MIDDLEWARES", GeonodeExtractMiddleware, MIDDLEWARE_PRIORITY
            )
        settings.setdefault_in_component_priority_dict(
            "ITEM_PIPELINES", IncrementalStatePipeline, PIPELINE_PRIORITY
        )
        # Only acts for spiders with an increcrawl_scope (the incremental spider).
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", SiteRedirectMiddleware, PRIORITY
        )
        # Only acts when INCRECRAWL_SKIP_NOT_DUE (or the spider) asks, never for
        # the incremental spider.
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", SkipNotDueMiddleware, SKIP_PRIORITY
        )
        # Items the add-on does not deliver are named in the log, not dumped; a
        # project's own formatter is left as it is.
        if settings.get("LOG_FORMATTER") == "scrapy.logformatter.LogFormatter":
            settings.set(
                "LOG_FORMATTER",
                "increcrawl_scrapy.log_formatter.NotDeliveredLogFormatter",
                priority="addon",
            )
        # A page's several items: its state follows all of them (not the incremental
        # spider, whose items are one a page).
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", PageItemsMiddleware, ITEMS_PRIORITY
        )
