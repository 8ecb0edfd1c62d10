"""A page's items and the project's own pipelines before the add-on's: one that
hands on a copy (``dict(item)``, ``dataclasses.asdict``) and one that stamps each
item. A page is one object, found again from the item's response and its labels,
never from the item's identity; what its fingerprint is taken of is one rule for a
page of one item and a page of several: its items as the spider yielded them,
before any pipeline."""

from __future__ import annotations

import dataclasses
import gc
import logging
import weakref
from collections.abc import Iterator
from typing import Any

import pytest
import pytest_twisted
import scrapy
from _pytest.logging import LogCaptureHandler
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawls.test_gone_pages_edges import add_on
from tests.crawls.test_pipeline_order import PlanSpider as OrderSpider

DAY = 86_400.0


@pytest.fixture(autouse=True)
def _no_debug_records() -> Iterator[None]:
    """The objects alive are counted: pytest keeps every record it captures, and a
    DEBUG one (``--log-level DEBUG``, or a root logger another test left there) holds
    its "Scraped from" response and item, and through them the pages: the harness's
    hold, not the add-on's. Scrapy's and our loggers at INFO make no such records
    (pytest resets the root's level for each phase, so the root's cannot be used)."""
    loggers = [logging.getLogger(name) for name in ("scrapy", "increcrawl_scrapy")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.INFO)
    yield
    for logger, level in zip(loggers, levels, strict=True):
        logger.setLevel(level)


#: Page number -> the items its page yields (else one), set by each test.
PLAN: dict[str, list[dict]] = {}
KIND: list[str] = ["dict"]  # the item type the spider yields


@dataclasses.dataclass
class Product:
    url: str
    sku: str
    v: int = 1
    change: str | None = None
    scraped_run: int | None = None


class PlanSpider(OrderSpider):
    """The home page's links followed, each page's items as PLAN says, of KIND."""

    def page(self, response: Any) -> Any:
        number = response.url.rsplit("/", 1)[1]
        for item in PLAN.get(number, [{"sku": f"{number}-a"}]):
            if KIND[0] == "dataclass":
                yield Product(url=response.url, **item)
            else:
                yield {"url": response.url, **item}


class Copying:
    """Hands on another object: a dict for a dict, ``asdict`` for a dataclass."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if dataclasses.is_dataclass(item):
            return dataclasses.asdict(item)  # type: ignore[arg-type]
        return dict(item)


RUN: list[int] = [0]


class Stamping:
    """Stamps each item with the run that scraped it (a field that moves every run)."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        item["scraped_run"] = RUN[0]
        return item


def ours_left(site: str) -> int:
    """The add-on's per-page and per-item objects of *site*'s pages still alive
    (other tests' crawls in this process may have left theirs)."""
    gc.collect()
    names = {"PageGroup", "Member", "Page", "PageItem"}
    found = 0
    for o in gc.get_objects():
        kind = type(o)
        if kind.__name__ not in names or not kind.__module__.startswith("increcrawl_scrapy"):
            continue
        page = getattr(o, "group", o)
        found += str(getattr(page, "url", "")).startswith(site)
    return found


async def crawl(settings: dict[str, Any], **kwargs: Any) -> tuple[list[dict], dict, int]:
    crawler = Crawler(PlanSpider, Settings(settings))
    items: list[dict] = []
    left: list[int] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    # Every page's items settled: nothing of them is kept for the rest of the crawl.
    site = kwargs["home"].rstrip("/")
    crawler.signals.connect(
        lambda: left.append(ours_left(site)), signal=signals.spider_idle, weak=False
    )
    await crawler.crawl(**kwargs)
    assert crawler.stats is not None
    return items, crawler.stats.get_stats(), left[0] if left else -1


def settings_with(tmp_path: Any, clock: Clock, pipeline: str, **more: Any) -> dict[str, Any]:
    PLAN.clear()
    return add_on(
        str(tmp_path / "s.sqlite"),
        clock,
        INCRECRAWL_SKIP_NOT_DUE=False,
        ITEM_PIPELINES={f"{__name__}.{pipeline}": 100},
        **more,
    )


@pytest.mark.parametrize("kind", ["dict", "dataclass"])
@pytest_twisted.ensureDeferred
async def test_a_copy_handed_on_before_the_add_on_is_its_pages_item(
    tmp_path: Any, clock: Clock, kind: str
) -> None:
    KIND[0] = kind
    more = settings_with(tmp_path, clock, "Copying")
    with SampleSite(pages=4) as site:
        home = site.url + "/"
        PLAN["1"] = [{"sku": "a"}, {"sku": "b"}, {"sku": "c"}]
        first, _, _ = await crawl(more, home=home)
        assert sorted(i["change"] for i in first) == ["new"] * 6
        clock.advance(2 * DAY)
        second, stats, left = await crawl(more, home=home)
        assert second == []  # an unchanged site delivers nothing
        assert stats["increcrawl/unchanged"] == 4
        assert stats.get("increcrawl/changed", 0) == 0
        assert left == 0
        PLAN["1"] = [{"sku": "a"}, {"sku": "b", "v": 2}, {"sku": "c"}]
        clock.advance(2 * DAY)
        third, stats, left = await crawl(more, home=home)
        assert [(i["sku"], i["change"]) for i in third] == [("b", "changed")]
        assert left == 0


@pytest_twisted.ensureDeferred
async def test_a_page_of_one_item_and_a_page_of_several_follow_one_rule(
    tmp_path: Any, clock: Clock
) -> None:
    """A pipeline before the add-on's stamps each item: neither page changes by it."""
    KIND[0] = "dict"
    more = settings_with(tmp_path, clock, "Stamping")
    with SampleSite(pages=3) as site:
        home = site.url + "/"
        PLAN["1"] = [{"sku": "a"}, {"sku": "b"}]  # several; page 2 has one
        RUN[0] = 1
        first, _, _ = await crawl(more, home=home)
        assert len(first) == 4 and {i["scraped_run"] for i in first} == {1}
        RUN[0] = 2
        clock.advance(2 * DAY)
        second, stats, _ = await crawl(more, home=home)
        assert [(i["url"], i["change"]) for i in second] == []
        assert stats["increcrawl/unchanged"] == 3


class Bare(scrapy.Item):
    """A project's own item type, without room for the add-on's labels."""

    url = scrapy.Field()
    sku = scrapy.Field()
    v = scrapy.Field()


class Converting:
    """A storage after the add-on's that hands on an item of its own type: the
    add-on's labels are not on what Scrapy says was scraped."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        return Bare(**{k: item[k] for k in ("url", "sku", "v") if k in item})


@pytest_twisted.ensureDeferred
async def test_an_item_substituted_after_the_add_on_is_handed_back_to_its_page(
    tmp_path: Any, clock: Clock
) -> None:
    """Scrapy's item_scraped names the response: the page's result is delivered
    though the object scraped carries none of the add-on's labels."""
    KIND[0] = "dict"
    more = settings_with(tmp_path, clock, "Copying")
    more["ITEM_PIPELINES"] = {f"{__name__}.Converting": 800}
    with SampleSite(pages=3) as site:
        home = site.url + "/"
        PLAN["1"] = [{"sku": "a"}, {"sku": "b"}]
        first, _, _ = await crawl(more, home=home)
        assert len(first) == 4
        clock.advance(2 * DAY)
        second, stats, left = await crawl(more, home=home)
        assert second == []  # delivered last time: not again
        assert stats["increcrawl/unchanged"] == 3 and left == 0


@pytest_twisted.ensureDeferred
async def test_a_finished_crawl_is_not_kept_alive_by_the_add_on(
    tmp_path: Any, clock: Clock
) -> None:
    """Nothing of the add-on's keeps a crawler past its crawl: a process running
    crawl after crawl (a Scrapyd node's, a test suite's) frees each one. The held
    items were a module-level registry by crawler whose values held their crawler."""
    more = settings_with(tmp_path, clock, "Stamping")
    with SampleSite(pages=3) as site:
        crawler = Crawler(PlanSpider, Settings(more))
        await crawler.crawl(home=site.url + "/")
    assert crawler.stats is not None
    assert crawler.stats.get_value("item_scraped_count") == 3
    gone = weakref.ref(crawler)
    del crawler
    # pytest's log capture keeps every record, and Scrapy's records carry their
    # crawler in `extra`: that is the harness's reference, not the add-on's.
    for handler in logging.getLogger().handlers:
        if isinstance(handler, LogCaptureHandler):
            handler.records.clear()
    gc.collect()
    assert gone() is None
