"""The add-on's gone pages (``crawl/gone_pages.py``) where the 404 is not simply a
page of items Scrapy ignores: a listing's items whose own pages are only checked, an
errback that yields an item for the 404, Scrapy's HttpErrorMiddleware disabled, and
a shared state without skipping (no statement from the reactor's thread)."""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import add_on
from tests.crawls.test_postgres_reactor import StatementThreads

DAY = 86_400.0


class Listing(scrapy.Spider):
    """Items from the home page, each named by the page it links to (its URL field);
    the linked pages are requested too, only to be checked."""

    name = "listing"

    def __init__(self, home: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [home]

    def parse(self, response: Any) -> Any:
        for link in response.css("a"):
            url = response.urljoin(link.attrib["href"])
            yield {"url": url, "title": link.css("::text").get()}
            yield scrapy.Request(url, callback=self.check)

    def check(self, response: Any) -> Any:
        return []


class Pages(scrapy.Spider):
    """The home page's links followed, one item a page; with ``errback_item`` an
    errback that yields an item of its own for a page that failed."""

    name = "pages"

    def __init__(self, home: str, errback_item: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [home]
        self.errback_item = errback_item

    def parse(self, response: Any) -> Any:
        errback = {"errback": self.failed} if self.errback_item else {}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.page, **errback)

    def page(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}

    def failed(self, failure: Any) -> Any:
        yield {"url": failure.request.url, "title": None, "error": "failed"}


async def crawl(spider: type[scrapy.Spider], settings: dict[str, Any], **kwargs: Any) -> list:
    crawler = Crawler(spider, Settings(settings))
    items: list[dict] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    await crawler.crawl(**kwargs)
    return items


def changes_of(items: list[dict], url: str) -> list[str]:
    return sorted(item["change"] for item in items if item["url"] == url)


@pytest_twisted.ensureDeferred
async def test_a_listed_item_whose_page_answers_404_is_the_listings_to_report(
    tmp_path: Any, clock: Clock
) -> None:
    """The item lives on the listing: the linked page's 404 does not make it gone
    (and the listing new again) each run."""
    settings = add_on(str(tmp_path / "s.sqlite"), clock)
    with SampleSite(pages=4) as site:
        first = await crawl(Listing, settings, home=site.url + "/")
        deleted = site.page_url(3)
        assert changes_of(first, deleted) == ["new"]
        site.delete(3, linked=True)
        for _ in range(3):
            clock.advance(2 * DAY)
            assert changes_of(await crawl(Listing, settings, home=site.url + "/"), deleted) == []


@pytest_twisted.ensureDeferred
async def test_an_errback_that_yields_an_item_for_the_404_says_what_the_page_is(
    tmp_path: Any, clock: Clock
) -> None:
    settings = add_on(str(tmp_path / "s.sqlite"), clock)
    with SampleSite(pages=4) as site:
        await crawl(Pages, settings, home=site.url + "/", errback_item=True)
        site.delete(3, linked=True)
        clock.advance(2 * DAY)
        second = await crawl(Pages, settings, home=site.url + "/", errback_item=True)
        assert changes_of(second, site.page_url(3)) == ["changed"]  # the errback's item


@pytest_twisted.ensureDeferred
async def test_without_scrapys_httperror_middleware_the_callback_has_the_404(
    tmp_path: Any, clock: Clock
) -> None:
    off = {"scrapy.spidermiddlewares.httperror.HttpErrorMiddleware": None}
    settings = add_on(str(tmp_path / "s.sqlite"), clock, SPIDER_MIDDLEWARES=off)
    with SampleSite(pages=4) as site:
        await crawl(Pages, settings, home=site.url + "/")
        site.delete(3, linked=True)
        clock.advance(2 * DAY)
        second = await crawl(Pages, settings, home=site.url + "/")
        assert changes_of(second, site.page_url(3)) == ["changed"]  # its title is gone


@pytest_twisted.ensureDeferred
async def test_a_gone_page_on_a_shared_state_without_skipping_reads_off_the_reactor(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = StatementThreads(monkeypatch)
    settings = add_on(postgres_dsn, clock, INCRECRAWL_SKIP_NOT_DUE=False)
    with SampleSite(pages=4) as site:
        await crawl(Pages, settings, home=site.url + "/")
        site.delete(3, linked=True)
        clock.advance(2 * DAY)
        second = await crawl(Pages, settings, home=site.url + "/")
        deleted = site.page_url(3)
    threads.watching = False
    assert changes_of(second, deleted) == ["gone"]
    assert threads.on_reactor == []
