"""Item rows (INCRECRAWL_ITEM_KEY) of a subclass of the incremental spider: labels of
their page's items, never fetched on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest_twisted

from increcrawl_scrapy.spiders.incremental import IncrementalSpider
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


class VariantsSpider(IncrementalSpider):
    """The incremental spider with a callback of its own: three items a page."""

    name = "variants"
    page_rules = ((r"/page/\d+$", "parse_variants"),)

    def parse_variants(self, response: Any) -> Any:
        number = response.url.rsplit("/", 1)[1]
        for variant in "abc":
            yield {"url": response.url, "sku": f"{number}-{variant}"}


@pytest_twisted.ensureDeferred
async def test_item_rows_of_a_subclass_are_not_queued_as_pages(
    tmp_path: Path, clock: Clock
) -> None:
    # INCRECRAWL_ITEM_KEY gives each item a row of its own (PAGE#item:KEY); those
    # rows are labels, never fetched: a page is fetched once a run, not once per item.
    with SampleSite(pages=4) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, INCRECRAWL_ITEM_KEY=["sku"])
        first = await run_crawl(settings, spider_class=VariantsSpider, sitemap_url=site.sitemap_url)
        assert len(first.items) == 12
        clock.advance(40 * DAY)
        site.reset_counters()
        second = await run_crawl(
            settings, spider_class=VariantsSpider, sitemap_url=site.sitemap_url
        )
        assert second.stats["increcrawl/due"] == 4
        assert [site.fetched[f"/page/{i}"] for i in range(4)] == [1, 1, 1, 1]


class HalfwaySpider(VariantsSpider):
    """Its callback fails after its first item, on one page."""

    name = "halfway"

    def parse_variants(self, response: Any) -> Any:
        number = response.url.rsplit("/", 1)[1]
        yield {"url": response.url, "sku": f"{number}-a"}
        if number == "2":
            raise ValueError("a bug in the project's callback")
        yield {"url": response.url, "sku": f"{number}-b"}


@pytest_twisted.ensureDeferred
async def test_a_callback_failing_half_way_keeps_what_it_gave(tmp_path: Path, clock: Clock) -> None:
    # The error is the spider's (logged, counted); the page's items are a set, so half
    # of it is not recorded (its missing items would be gone): the page stays as it
    # was, and the other pages are untouched.
    with SampleSite(pages=4) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, INCRECRAWL_ITEM_KEY=["sku"])
        done = await run_crawl(settings, spider_class=HalfwaySpider, sitemap_url=site.sitemap_url)
        page = site.page_url(2)
    skus = sorted(item["sku"] for item in done.items)
    assert skus == ["0-a", "0-b", "1-a", "1-b", "3-a", "3-b"]
    assert done.stats["spider_exceptions/ValueError"] == 1
    with StateStore(tmp_path / "s.sqlite", clock=clock) as store:
        assert store.get(page) is None or store.get(page).last_fetched is None
