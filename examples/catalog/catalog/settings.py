BOT_NAME = "catalog"
SPIDER_MODULES = ["catalog.spiders"]
NEWSPIDER_MODULE = "catalog.spiders"
ROBOTSTXT_OBEY = True
ITEM_PIPELINES = {"catalog.pipelines.StoragePipeline": 800}  # the project's own
FEED_EXPORT_ENCODING = "utf-8"

# Incremental crawling: the add-on, and (opt-in) skipping pages that are not due.
ADDONS = {"increcrawl_scrapy.Addon": 300}
INCRECRAWL_SKIP_NOT_DUE = True
INCRECRAWL_DB = "catalog_state.sqlite"
