"""A spider of a grid paged by postbacks (ASP.NET): page one's pager posts the form
for each other page, every one to the same URL (``/grid``). Copied into a test's
project directory (``SPIDER_MODULES=postback_grid``)."""

import scrapy
from scrapy import FormRequest


class PostbackGridSpider(scrapy.Spider):
    name = "postback_grid"

    def __init__(self, start_url: str = "", **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start_url.rstrip("/") + "/grid"]

    def parse(self, response):
        for row in response.css("tr.quote"):
            yield {
                "text": row.css("td.text::text").get(),
                "author": row.css("td.author::text").get(),
                "tags": row.css("td.tags::text").get(),
            }
        if response.meta.get("page"):
            return
        for n in (2, 3, 4, 5, 6):  # one at a time, LIFO: page six is asked first
            yield FormRequest.from_response(
                response,
                formid="grid",
                meta={"page": n},
                formdata={"__EVENTTARGET": "grid", "__EVENTARGUMENT": f"Page${n}"},
            )
