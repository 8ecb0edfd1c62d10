BOT_NAME = "quotes"
SPIDER_MODULES = ["quotes.spiders"]
NEWSPIDER_MODULE = "quotes.spiders"
ROBOTSTXT_OBEY = False
ITEM_PIPELINES = {"quotes.pipelines.StoragePipeline": 800}  # the project's own
FEED_EXPORT_ENCODING = "utf-8"

# Incremental crawling: the README's two lines.
ADDONS = {"increcrawl_scrapy.Addon": 300}
INCRECRAWL_SKIP_NOT_DUE = True
INCRECRAWL_DB = "quotes_state.sqlite"
