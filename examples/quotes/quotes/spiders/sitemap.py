"""A ``SitemapSpider`` subclass: the pages the sitemap lists, their quotes as items."""

from __future__ import annotations

from scrapy.spiders import SitemapSpider


class QuotesSitemapSpider(SitemapSpider):
    name = "sitemap"

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.sitemap_urls = [f"{start_url.rstrip('/')}/sitemap.xml"]

    def parse(self, response):
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
            }
