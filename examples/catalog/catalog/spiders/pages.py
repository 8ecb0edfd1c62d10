"""An ordinary CrawlSpider: follows the listing's links, yields one item a page."""

from __future__ import annotations

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from catalog.items import make


class PagesSpider(CrawlSpider):
    name = "pages"
    rules = (Rule(LinkExtractor(allow=r"/page/\d+$"), callback="parse_page"),)

    def __init__(self, start_url: str = "", item: str = "dict", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_urls = [start_url]
        self.item_kind = item

    def parse_page(self, response):
        yield make(
            self.item_kind,
            url=response.url,
            title=response.css("h1::text").get(),
            text=" ".join(response.css("body > p::text").getall()),
        )
