"""An ordinary CrawlSpider: every link followed from the home page, the quotes of
every page it reaches as items (without a URL field)."""

from __future__ import annotations

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule


class PagesSpider(CrawlSpider):
    name = "pages"
    rules = (Rule(LinkExtractor(), callback="parse_page", follow=True),)

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_urls = [start_url]

    def parse_start_url(self, response):
        return self.parse_page(response)

    def parse_page(self, response):
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
            }
