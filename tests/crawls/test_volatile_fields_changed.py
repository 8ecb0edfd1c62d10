"""A setting changed between runs: a field named volatile since
(``INCRECRAWL_VOLATILE_FIELDS``) is compared in no item, new or kept. Before, the
previous run's prints still held it, and every item of an unchanged site was
delivered ``changed`` with that field in ``changed_fields``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest_twisted
import scrapy

from tests.conftest import Clock
from tests.crawling import add_on, run_crawl
from tests.embedding.test_unreached_answers import Site, site  # noqa: F401 (fixture)

DAY = 86_400.0
LONG = "a long field, hashed and not kept " * 20  # over the 300 characters kept


class Listing(scrapy.Spider):
    """Items without a URL field, and a detail page's item with one; each stamped."""

    name = "stamped"

    def __init__(self, home: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.home = home

    async def start(self) -> Any:
        yield scrapy.Request(self.home)
        yield scrapy.Request(self.home + "d", callback=self.detail)

    def parse(self, response: Any) -> Any:
        for text in response.css("li::text").getall():
            yield {"text": text, "body": LONG, "scraped_at": "2026-01-01"}

    def detail(self, response: Any) -> Any:
        yield {"url": response.url, "title": "detail", "scraped_at": "2026-01-01"}


@pytest_twisted.ensureDeferred
async def test_a_field_named_volatile_since_is_no_change(
    tmp_path: Path,
    clock: Clock,
    site: Site,  # noqa: F811
) -> None:
    site.routes["/"] = (200, "<html><body><ul><li>alpha</li><li>beta</li></ul></body></html>", {})
    site.routes["/d"] = (200, "<html><body><h1>detail</h1></body></html>", {})
    db = str(tmp_path / "state.sqlite")
    first = await run_crawl(add_on(db, clock), spider_class=Listing, home=site.url("/"))
    assert len(first.items) == 3
    clock.advance(3 * DAY)
    volatile = add_on(db, clock, INCRECRAWL_VOLATILE_FIELDS=["scraped_at"])
    second = await run_crawl(volatile, spider_class=Listing, home=site.url("/"))
    assert [(item["change"], item.get("changed_fields")) for item in second.items] == []
