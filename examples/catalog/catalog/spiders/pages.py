"""An ordinary CrawlSpider: follows the listing's links, yields one item a page."""

from __future__ import annotations

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from catalog.items import make


class PagesSpider(CrawlSpider):
    name = "pages"
    rules = (
        Rule(LinkExtractor(allow=r"/page/\d+$"), callback="parse_page", process_request="mark"),
    )

    def __init__(self, start_url: str = "", item: str = "dict", always: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_urls = [start_url]
        self.item_kind = item
        self.always = always  # -a always=/page/3: fetched every run, due or not

    def mark(self, request, response):
        if self.always and request.url.endswith(self.always):
            request.meta["increcrawl_always"] = True
        return request

    def parse_page(self, response):
        yield make(
            self.item_kind,
            url=response.url,
            title=response.css("h1::text").get(),
            text=" ".join(response.css("body > p::text").getall()),
        )
