"""Scrapy's tutorial spider, as it is: items without a URL field, ten a page, and
the next page followed."""

from __future__ import annotations

import scrapy


class QuotesSpider(scrapy.Spider):
    name = "quotes"

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_urls = [start_url]

    def parse(self, response):
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
            }
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, callback=self.parse)
