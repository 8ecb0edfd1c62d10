import scrapy


class ProductItem(scrapy.Item):
    link = scrapy.Field()
    name = scrapy.Field()
    description = scrapy.Field()
    currency = scrapy.Field()
    # Filled in by increcrawl's pipeline when the item declares them.
    change = scrapy.Field()
    content_hash = scrapy.Field()
    fetched_at = scrapy.Field()
