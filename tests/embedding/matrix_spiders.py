"""The project shapes' spiders, as their users write them (the matrix:
``matrix.py``). Every quote spider starts from the site given as ``site``."""

from __future__ import annotations

import json
from typing import Any

import scrapy
from scrapy.http import FormRequest

from tests.pages import test_doc_sites as doc_sites


def quote_of(block: Any) -> dict[str, Any]:
    return {
        "text": block.css("span.text::text").get(),
        "author": block.css("small.author::text").get(),
        "tags": block.css("div.tags a.tag::text").getall(),
    }


class TutorialSpider(scrapy.Spider):
    """Scrapy's tutorial spider: items without a URL field, the next page followed."""

    name = "tutorial"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site
        self.start_urls = [self.start_path()]

    def start_path(self) -> str:
        return f"{self.site}/"

    def parse(self, response: Any) -> Any:
        for block in response.css("div.quote"):
            yield self.item(block, response)
        yield from response.follow_all(css="li.next a", callback=self.parse)

    def item(self, block: Any, response: Any) -> dict[str, Any]:
        return quote_of(block)


class LoginSpider(TutorialSpider):
    """Logs in first (``FormRequest.from_response``), then crawls as the tutorial's."""

    name = "login"

    def start_path(self) -> str:
        return f"{self.site}/login"

    def parse(self, response: Any) -> Any:
        if response.css("input[name=csrf_token]"):
            yield FormRequest.from_response(
                response, formdata={"username": "admin", "password": "admin"}
            )
            return
        yield from super().parse(response)


class ApiSpider(scrapy.Spider):
    """quotes.toscrape.com's API, page after page while ``has_next``."""

    name = "api"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/api/quotes?page=1"]

    def parse(self, response: Any) -> Any:
        data = json.loads(response.text)
        for quote in data["quotes"]:
            yield {"text": quote["text"], "author": quote["author"]["name"], "tags": quote["tags"]}
        if data["has_next"]:
            yield response.follow(f"/api/quotes?page={data['page'] + 1}")


class BrowserSpider(TutorialSpider):
    """The pages rendered by JavaScript, through scrapy-playwright."""

    name = "browser"

    def start_path(self) -> str:
        return f"{self.site}/js/"

    async def start(self) -> Any:
        for url in self.start_urls:
            yield scrapy.Request(url, meta={"playwright": True})

    def parse(self, response: Any) -> Any:
        for block in response.css("div.quote"):
            yield quote_of(block)
        for link in response.css("li.next a"):
            yield response.follow(link, meta={"playwright": True})


class GridSpider(scrapy.Spider):
    """A grid paged by postbacks: page 2 and on by the form posted to its own URL."""

    name = "grid"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/grid"]

    def parse(self, response: Any) -> Any:
        for row in response.css("tr.quote"):
            yield {
                "text": row.css("td.text::text").get(),
                "author": row.css("td.author::text").get(),
                "tags": row.css("td.tags::text").get(),
            }
        argument = response.css("a.next::attr(data-arg)").get()
        if argument:
            yield FormRequest.from_response(
                response,
                formid="grid",
                formdata={"__EVENTTARGET": "grid", "__EVENTARGUMENT": argument},
            )


class PortraitSpider(TutorialSpider):
    """The tutorial's items with their author's portrait, for ``ImagesPipeline``."""

    name = "portraits"

    def item(self, block: Any, response: Any) -> dict[str, Any]:
        item = quote_of(block)
        slug = str(item["author"]).lower().replace(" ", "-")
        item["image_urls"] = [response.urljoin(f"/img/{slug}.png")]
        return item


class DocsSpider(doc_sites.DocsSpider):
    """What a user writes first for a docs site (``tests/pages/test_doc_sites.py``):
    every link followed, a page's title and paragraphs, its URL in the item."""

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(home=f"{site}/", **kwargs)
