BOT_NAME = "shop"
SPIDER_MODULES = ["shop.spiders"]
NEWSPIDER_MODULE = "shop.spiders"

ROBOTSTXT_OBEY = True
FEED_EXPORT_ENCODING = "utf-8"

# The project's own components: the add-on leaves them as they are.
DOWNLOADER_MIDDLEWARES = {"shop.middlewares.ShopHeadersMiddleware": 543}
ITEM_PIPELINES = {"shop.pipelines.CurrencyPipeline": 500}

# Incremental crawling, in one line.
ADDONS = {"increcrawl_scrapy.Addon": 300}

# Our items call their URL and content fields differently.
INCRECRAWL_URL_FIELD = "link"
INCRECRAWL_CONTENT_FIELD = "description"
INCRECRAWL_DB = "shop_state.sqlite"
# Our spider parses HTML with selectors, so ask the API for HTML.
GEONODE_FORMATS = ["html"]
