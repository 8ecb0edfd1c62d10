"""The quotes spider fed its last page late: pages 1 to 5 by their Next links, page 6
scheduled by a ``spider_idle`` handler (Scrapy's documented way to feed a crawl late,
as scrapy-redis does). Copied into a test's project directory
(``SPIDER_MODULES=late_pages``)."""

import re

import scrapy
from scrapy import signals
from scrapy.exceptions import DontCloseSpider


class LatePagesSpider(scrapy.Spider):
    name = "late_pages"

    def __init__(self, start_url: str = "", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url]
        self.base = start_url.rstrip("/")
        self.fed = False

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.idle, signal=signals.spider_idle)
        return spider

    def idle(self):
        if not self.fed:
            self.fed = True
            self.crawler.engine.crawl(scrapy.Request(f"{self.base}/page/6/"))
            raise DontCloseSpider

    def parse(self, response):
        for quote in response.css("div.quote"):
            yield {
                "text": quote.css("span.text::text").get(),
                "author": quote.css("small.author::text").get(),
                "tags": quote.css("div.tags a.tag::text").getall(),
            }
        following = response.css("li.next a::attr(href)").get()
        if following and int(re.findall(r"\d+", following)[-1]) <= 5:
            yield response.follow(following)
