"""The state pipeline on every item type itemadapter knows, with renamed fields."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import attr
import pytest
import scrapy
from scrapy import signals
from scrapy.exceptions import DropItem
from scrapy.utils.test import get_crawler

from increcrawl_scrapy.pipelines import IncrementalStatePipeline
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock


class Labelled(scrapy.Item):
    link = scrapy.Field()
    body = scrapy.Field()
    change = scrapy.Field()
    content_hash = scrapy.Field()


class Bare(scrapy.Item):
    link = scrapy.Field()
    body = scrapy.Field()


@dataclasses.dataclass
class DataItem:
    link: str
    body: str
    change: str | None = None


@attr.s(auto_attribs=True)
class AttrsItem:
    link: str
    body: str
    change: str | None = None


def make(kind: str, url: str, body: str):
    if kind == "dict":
        return {"link": url, "body": body}
    return {"Item": Labelled, "Bare": Bare, "dataclass": DataItem, "attrs": AttrsItem}[kind](
        link=url, body=body
    )


def scraped(pipeline: IncrementalStatePipeline, item):
    """The item went through every pipeline and out to the feeds, as Scrapy says."""
    crawler = pipeline.crawler
    crawler.signals.send_catch_log(
        signals.item_scraped, item=item, response=None, spider=crawler.spider
    )
    return item


def field(item, name):
    return item[name] if isinstance(item, dict | scrapy.Item) else getattr(item, name)


@pytest.fixture
def pipeline(tmp_path: Path, clock: Clock):
    crawler = get_crawler(
        scrapy.Spider,
        {
            "INCRECRAWL_DB": str(tmp_path / "items.sqlite"),
            "INCRECRAWL_URL_FIELD": "link",
            "INCRECRAWL_CONTENT_FIELD": "body",
            "INCRECRAWL_CLOCK": clock,
        },
    )
    crawler.spider = crawler._create_spider("catalog")
    pipe = IncrementalStatePipeline.from_crawler(crawler)
    pipe.open_spider()
    yield pipe
    crawler.signals.send_catch_log(signals.spider_closed, spider=crawler.spider, reason="finished")


@pytest.mark.parametrize("kind", ["dict", "Item", "Bare", "dataclass", "attrs"])
def test_every_item_type(pipeline: IncrementalStatePipeline, clock: Clock, kind: str) -> None:
    url = f"https://shop.example/{kind}"
    first = scraped(pipeline, pipeline.process_item(make(kind, url, "Red shoes")))
    if kind != "Bare":
        assert field(first, "change") == "new"
    clock.advance(86400)
    with pytest.raises(DropItem):  # unchanged: not exported
        pipeline.process_item(make(kind, url, "Red shoes"))
    clock.advance(86400)
    changed = scraped(pipeline, pipeline.process_item(make(kind, url, "Blue shoes")))
    if kind != "Bare":
        assert field(changed, "change") == "changed"
    if kind in ("dict", "Item"):
        assert len(field(changed, "content_hash")) == 64
    pipeline.store.flush()
    with StateStore(pipeline.config.db_path) as store:
        page = store.get(url)
        assert page.seed == "catalog" and page.change_count == 1 and page.fetch_count == 3


def test_items_without_a_url_pass_through(pipeline: IncrementalStatePipeline, caplog) -> None:
    item = {"title": "not a page"}
    assert pipeline.process_item(item) is item
    assert pipeline.process_item({"link": "not a url", "body": "x"})["body"] == "x"
    assert pipeline.process_item({"link": 42, "body": "y"})["body"] == "y"
    warnings = [r for r in caplog.records if r.levelname == "WARNING" and "An item" in r.message]
    assert len(warnings) == 1  # once a crawl, with the count in the stats
    assert pipeline.crawler.stats.get_value("increcrawl/items/without_url") == 3


def test_the_item_itself_is_fingerprinted_without_a_content_field(tmp_path: Path, clock) -> None:
    crawler = get_crawler(
        scrapy.Spider,
        {
            "INCRECRAWL_DB": str(tmp_path / "whole.sqlite"),
            "INCRECRAWL_CLOCK": clock,
            "INCRECRAWL_VOLATILE_FIELDS": ["seen_at"],
        },
    )
    crawler.spider = crawler._create_spider("whole")
    pipe = IncrementalStatePipeline.from_crawler(crawler)
    pipe.open_spider()
    url = "https://shop.example/p/1"
    item = {"url": url, "price": 10, "tags": {"b", "a"}, "seen_at": "2025-01-01"}
    assert scraped(pipe, pipe.process_item(dict(item)))["change"] == "new"
    clock.advance(86400)
    with pytest.raises(DropItem):  # the volatile field moved, nothing else
        pipe.process_item({**item, "seen_at": "2025-01-02", "tags": {"a", "b"}})
    clock.advance(86400)
    assert scraped(pipe, pipe.process_item({**item, "price": 11}))["change"] == "changed"
    crawler.signals.send_catch_log(signals.spider_closed, spider=crawler.spider, reason="finished")
