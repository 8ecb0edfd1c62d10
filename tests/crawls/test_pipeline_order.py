"""A project's own pipelines around the add-on's: one before it that drops an item
(a validation), one after it that drops a delivered item (a storage that failed).
A page's result is written once its items are settled, and only then: never held
for good by an item that never reached the add-on, never written before a change a
later pipeline dropped."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy.exceptions import DropItem

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawls.test_gone_pages_edges import add_on, crawl

DAY = 86_400.0
#: Page number -> the items its page yields (else one), set by each test.
PLAN: dict[str, list[dict]] = {}
EARLY_DROP: set[str] = set()  # skus the validation drops
LATE_DROP: set[tuple[str, str]] = set()  # (sku, change) the storage fails on


class PlanSpider(scrapy.Spider):
    name = "plan"

    def __init__(self, home: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [home]

    def parse(self, response: Any) -> Any:
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.page)

    def page(self, response: Any) -> Any:
        number = response.url.rsplit("/", 1)[1]
        for item in PLAN.get(number, [{"sku": f"{number}-a"}]):
            # Items without a URL field belong to the response: they may move.
            yield {**item} if item.get("free") else {"url": response.url, **item}


class Validation:
    def process_item(self, item: Any, spider: Any = None) -> Any:
        if item.get("sku") in EARLY_DROP:
            raise DropItem("invalid")
        return item


class Storage:
    def process_item(self, item: Any, spider: Any = None) -> Any:
        if (item.get("sku"), item.get("change")) in LATE_DROP:
            raise DropItem("storage unavailable")
        return dict(item) if COPY else item  # a pipeline may hand on another object


COPY: list[bool] = []  # non-empty: the storage returns a copy


def settings(tmp_path: Any, clock: Clock, **more: Any) -> dict[str, Any]:
    PLAN.clear()
    EARLY_DROP.clear()
    LATE_DROP.clear()
    COPY.clear()
    return add_on(
        str(tmp_path / "s.sqlite"),
        clock,
        INCRECRAWL_SKIP_NOT_DUE=False,
        ITEM_PIPELINES={f"{__name__}.Validation": 100, f"{__name__}.Storage": 800},
        **more,
    )


def changes(items: list[dict], url: str) -> list[tuple[str, str]]:
    return sorted((item["sku"], item["change"]) for item in items if item.get("url") == url)


@pytest_twisted.ensureDeferred
async def test_an_item_dropped_before_the_add_on_does_not_hold_its_page(
    tmp_path: Any, clock: Clock
) -> None:
    more = settings(tmp_path, clock)
    with SampleSite(pages=2) as site:
        home, url = site.url + "/", site.page_url(1)
        PLAN["1"] = [{"sku": "a"}, {"sku": "b"}, {"sku": "x"}]
        EARLY_DROP.add("x")  # never reaches the add-on, every run
        first = await crawl(PlanSpider, more, home=home)
        assert changes(first, url) == [("a", "new"), ("b", "new")]
        with StateStore(tmp_path / "s.sqlite", clock=clock) as store:
            page = store.get(url)
        assert page is not None and page.fetch_count == 1
        clock.advance(2 * DAY)
        assert changes(await crawl(PlanSpider, more, home=home), url) == []
        PLAN["1"] = [{"sku": "a"}, {"sku": "x"}]  # b leaves the page
        clock.advance(2 * DAY)
        assert changes(await crawl(PlanSpider, more, home=home), url) == [("b", "gone")]


@pytest_twisted.ensureDeferred
async def test_a_moved_item_dropped_before_the_add_on_does_not_hold_its_pages(
    tmp_path: Any, clock: Clock
) -> None:
    more = settings(tmp_path, clock)
    with SampleSite(pages=3) as site:
        home = site.url + "/"
        PLAN["1"] = [{"sku": "a", "free": 1}, {"sku": "x", "free": 1}]
        PLAN["2"] = [{"sku": "c", "v": 1, "free": 1}]
        EARLY_DROP.add("x")
        await crawl(PlanSpider, more, home=home)
        for run in (2, 3):  # x moves to page 2 (held until idle, then dropped); c changes
            PLAN["1"] = [{"sku": "a", "free": 1}]
            PLAN["2"] = [{"sku": "c", "v": run, "free": 1}, {"sku": "x", "free": 1}]
            clock.advance(2 * DAY)
            await crawl(PlanSpider, more, home=home)
            with StateStore(tmp_path / "s.sqlite", clock=clock) as store:
                counts = [store.get(site.page_url(i)).fetch_count for i in (1, 2)]
            assert counts == [run, run]


@pytest.mark.parametrize("copy", [False, True])
@pytest_twisted.ensureDeferred
async def test_a_change_dropped_after_the_add_on_is_reported_again_with_export_all(
    tmp_path: Any, clock: Clock, copy: bool
) -> None:
    more = settings(tmp_path, clock, INCRECRAWL_EXPORT="all")
    COPY.extend([True] if copy else [])
    with SampleSite(pages=2) as site:
        home, url = site.url + "/", site.page_url(1)
        PLAN["1"] = [{"sku": "a", "v": 1, "w": 1}, {"sku": "b", "v": 1, "w": 1}]
        await crawl(PlanSpider, more, home=home)
        PLAN["1"] = [{"sku": "a", "v": 1, "w": 1}, {"sku": "b", "v": 2, "w": 1}]
        LATE_DROP.add(("b", "changed"))  # delivered unchanged a, failed on changed b
        clock.advance(2 * DAY)
        assert changes(await crawl(PlanSpider, more, home=home), url) == [("a", "unchanged")]
        LATE_DROP.clear()
        clock.advance(2 * DAY)
        third = await crawl(PlanSpider, more, home=home)
        assert changes(third, url) == [("a", "unchanged"), ("b", "changed")]
