import scrapy

from shop.items import ProductItem


class ProductsSpider(scrapy.Spider):
    name = "products"

    def __init__(self, start_url=None, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_url = start_url

    async def start(self):
        yield scrapy.Request(self.start_url, callback=self.parse)

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            if "/page/" in href:
                yield response.follow(href, callback=self.parse_product)

    def parse_product(self, response):
        yield ProductItem(
            link=response.url,
            name=response.css("h1::text").get(),
            description=response.css("p::text").get(),
        )
