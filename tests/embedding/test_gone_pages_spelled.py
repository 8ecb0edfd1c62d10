"""A page deleted from a project's site is ``gone`` however its requests and items
look: whether its own requests could be kept for a replay (meta that is not plain
data, as scrapy-playwright's ``PageMethod`` objects) and however its item's URL
field spells the page's URL (a trailing slash, another percent-encoding). Before,
such a page was taken for "items from another response" and its 404 ignored:
its items were never delivered ``gone``, the page due on every run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import add_on, run_crawl

DAY = 86_400.0


class PageMethod:
    """What scrapy-playwright puts in a request's meta: an object, not plain data."""

    def __init__(self, method: str, *args: Any) -> None:
        self.method, self.args = method, args


class ProjectSpider(scrapy.Spider):
    """A page's item, its links followed; *spelling* how the item names its page."""

    name = "project"

    def __init__(self, urls: list[str], spelling: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls, self.spelling = urls, spelling

    def parse(self, response: Any) -> Any:
        url = response.url
        if self.spelling == "slash":
            url += "/"
        elif self.spelling == "encoded":
            url = url.replace("/page/", "/%70age/")  # "p" percent-encoded: the same URL
        if "/page/" in response.url:
            yield {"url": url, "title": response.css("h1::text").get()}
        meta = {"playwright_page_methods": [PageMethod("wait_for_selector", "h1")]}
        for link in response.css("a::attr(href)").getall():
            if "?" in link:  # the sample site's tracked variants of a page: not here
                continue
            yield response.follow(link, meta=meta if self.spelling == "playwright" else {})


@pytest.mark.parametrize("spelling", ["playwright", "slash", "encoded"])
@pytest_twisted.ensureDeferred
async def test_a_deleted_page_is_gone_however_its_requests_and_items_look(
    tmp_path: Path, clock: Clock, spelling: str
) -> None:
    settings = add_on(str(tmp_path / "state.sqlite"), clock, LOG_LEVEL="INFO")
    with SampleSite(pages=5) as site:
        first = await run_crawl(settings, spider_class=ProjectSpider, urls=[site.url + "/"],
                                spelling=spelling)  # fmt: skip
        assert len(first.items) == 5
        assert {item["change"] for item in first.items} == {"new"}
        before = next(item for item in first.items if "/3" in item["url"])

        site.delete(3, status=404, linked=True)  # still linked from the home page
        clock.advance(2 * DAY)
        second = await run_crawl(settings, spider_class=ProjectSpider, urls=[site.url + "/"],
                                 spelling=spelling)  # fmt: skip
        assert site.fetched["/page/3"] == 2
        assert [(item["change"], item["title"]) for item in second.items] == [
            ("gone", before["title"])
        ]
        assert second.stats.get("increcrawl/gone") == 1

        # Gone once: not delivered again, not due every run.
        clock.advance(2 * DAY)
        third = await run_crawl(settings, spider_class=ProjectSpider, urls=[site.url + "/"],
                                spelling=spelling)  # fmt: skip
        assert third.items == []


@pytest_twisted.ensureDeferred
async def test_a_page_kept_before_the_upgrade_is_gone_too(tmp_path: Path, clock: Clock) -> None:
    """A memory stored before it said whose items it holds, of a page whose requests
    could not be kept (scrapy-playwright's meta): its page's 404 makes it gone."""
    import json
    import sqlite3
    import zlib

    settings = add_on(str(tmp_path / "state.sqlite"), clock, LOG_LEVEL="INFO")
    with SampleSite(pages=5) as site:
        await run_crawl(settings, spider_class=ProjectSpider, urls=[site.url + "/"],
                        spelling="playwright")  # fmt: skip
        # As the version before wrote them: no "own", requests None for these pages.
        with sqlite3.connect(tmp_path / "state.sqlite") as db:
            for key, body in db.execute("SELECT normalized_url, body FROM memories").fetchall():
                kept = json.loads(zlib.decompress(body))
                old = {"items": kept["items"], "requests": kept["requests"]}
                blob = zlib.compress(json.dumps(old).encode())
                db.execute("UPDATE memories SET body = ? WHERE normalized_url = ?", (blob, key))
        site.delete(3, status=404, linked=True)
        clock.advance(2 * DAY)
        second = await run_crawl(settings, spider_class=ProjectSpider, urls=[site.url + "/"],
                                 spelling="playwright")  # fmt: skip
        assert [(item["change"], item["title"]) for item in second.items] == [("gone", "Page 3")]
