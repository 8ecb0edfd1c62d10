"""Three items a page (a product's variants), all under the page's URL."""

from __future__ import annotations

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class VariantsSpider(CrawlSpider):
    name = "variants"
    rules = (Rule(LinkExtractor(allow=r"/page/\d+$"), callback="parse_page"),)

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_urls = [start_url]

    def parse_page(self, response):
        number = response.url.rsplit("/", 1)[1]
        title = response.css("h1::text").get()
        text = " ".join(response.css("body > p::text").getall())
        # Variant "b" shows the page's text: only it changes when the page is edited.
        for variant, description in (("a", title), ("b", text), ("c", title)):
            yield {"url": response.url, "sku": f"{number}-{variant}", "description": description}
