"""The add-on in a project with Scrapy's HTTP cache on (``HTTPCACHE_ENABLED = True``,
common while developing). A cached answer is not a fetch: with the cache's default
policy every page came from the cache from the second run on, the add-on recorded it
unchanged and lengthened its interval, and no edit of the site was ever delivered,
with nothing said. Every page reaches the site now, a page with state conditionally,
and the crawl says so when it starts; a cache the project placed before the add-on
(its answers come before the add-on sees the request) is said to hide changes, and
its answers are recorded as nothing."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import pytest_twisted
import scrapy

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import add_on as shared_add_on
from tests.crawling import run_crawl

DAY = 86_400.0
CACHE = "scrapy.downloadermiddlewares.httpcache.HttpCacheMiddleware"


class PagesSpider(scrapy.Spider):
    """A project's spider: an item of each page, its URL and its text."""

    name = "texts"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "text": response.css("h1 + p::text").get()}


def add_on(tmp_path: Any, clock: Clock, **more: Any) -> dict[str, Any]:
    return shared_add_on(
        str(tmp_path / "state.sqlite"),
        clock,
        **{
            "INCRECRAWL_SKIP_NOT_DUE": False,
            "LOG_LEVEL": "INFO",
            "HTTPCACHE_ENABLED": True,
            "HTTPCACHE_DIR": str(tmp_path / "httpcache"),
            **more,
        },
    )


def fetched(db: str) -> dict[str, int]:
    with sqlite3.connect(db) as connection:
        return dict(connection.execute("SELECT url, fetch_count FROM pages"))


@pytest.mark.parametrize(
    ("skip_not_due", "db"), [(True, "sqlite"), (False, "sqlite"), (False, "postgres")]
)
@pytest_twisted.ensureDeferred
async def test_every_edit_is_delivered_with_the_http_cache_on(
    tmp_path: Any, clock: Clock, skip_not_due: bool, db: str, request: Any
) -> None:
    settings = add_on(tmp_path, clock, INCRECRAWL_SKIP_NOT_DUE=skip_not_due)
    if db == "postgres":  # the rows read off the reactor's thread
        settings["INCRECRAWL_DB"] = request.getfixturevalue("postgres_dsn")
    with SampleSite(pages=4) as site:
        urls = [site.page_url(i) for i in range(4)]
        first = await run_crawl(settings, spider_class=PagesSpider, urls=urls)
        assert first.changes("new") == set(urls)
        # Page 0 has an ETag, page 1 a Last-Modified date, page 2 no validator.
        delivered, reached, conditional = [], [], []
        for edited in (0, 1, 2):
            site.edit(edited)
            site.reset_counters()
            clock.advance(40 * DAY)
            run = await run_crawl(settings, spider_class=PagesSpider, urls=urls)
            delivered.append(run.changes("changed"))
            reached.append(set(site.fetched))
            conditional.append((site.conditional["/page/0"], site.conditional["/page/1"]))
        assert delivered == [{site.page_url(0)}, {site.page_url(1)}, {site.page_url(2)}]
        # Each run asked the site for every page, conditionally where it can be.
        assert reached == [{f"/page/{i}" for i in range(4)}] * 3
        assert conditional == [(1, 1)] * 3
        # Said once, when the crawl starts.
        assert len(said(first.log, "INFO")) == 1, said(first.log, "INFO")


@pytest_twisted.ensureDeferred
async def test_a_cache_placed_before_the_add_on_is_said_and_never_recorded(
    tmp_path: Any, clock: Clock
) -> None:
    """The project places its cache before the add-on's middleware, and filled it
    without the add-on: the cache answers before the add-on sees the requests. The
    crawl says so at its start, and no answer of the cache is recorded as a fetch of
    a page with state: not an old version, not a 404 it kept."""
    settings = add_on(tmp_path, clock, DOWNLOADER_MIDDLEWARES={CACHE: 50})
    db = settings["INCRECRAWL_DB"]
    with SampleSite(pages=4) as site:
        urls = [site.page_url(i) for i in range(4)]
        uncached = {**settings, "HTTPCACHE_ENABLED": False}
        first = await run_crawl(uncached, spider_class=PagesSpider, urls=urls)
        assert first.changes("new") == set(urls)
        before = fetched(db)
        site.edit(0)
        site.delete(3)
        without = {**settings, "ADDONS": {}}
        await run_crawl(without, spider_class=PagesSpider, urls=urls)  # fills the cache
        asked = dict(site.fetched)
        runs = []
        for _ in range(2):
            clock.advance(40 * DAY)
            runs.append(await run_crawl(settings, spider_class=PagesSpider, urls=urls))
        assert dict(site.fetched) == asked  # every answer from the cache
        assert fetched(db) == before  # nothing recorded: a cached answer is not a fetch
        # Its items delivered as they are, without state; page 3's cached 404 no gone.
        assert [item.get("change") for run in runs for item in run.items] == [None] * 6
        assert len(said(runs[0].log, "WARNING")) == 1, said(runs[0].log, "WARNING")


def said(log: list[str], level: str) -> list[str]:
    """What the add-on said of the HTTP cache at *level*."""
    return [line for line in log if line.startswith(f"{level} increcrawl") and "HTTP cache" in line]
