"""The tutorial spider with ``response.follow`` and ``cb_kwargs``: each item says
which page it was on, from the argument its request carried."""

from __future__ import annotations

import scrapy


class NumberedSpider(scrapy.Spider):
    name = "numbered"

    def __init__(self, start_url: str = "", *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not start_url:
            raise ValueError("-a start_url=URL is required")
        self.start_url = start_url

    async def start(self):
        yield scrapy.Request(self.start_url, callback=self.parse_page, cb_kwargs={"page": 1})

    def parse_page(self, response, page):
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "page": page,
            }
        next_page = response.css("li.next a::attr(href)").get()
        if next_page is not None:
            yield response.follow(next_page, self.parse_page, cb_kwargs={"page": page + 1})
