"""Items of a shop's listings through the add-on, in-process against a loopback
shop (issue #50): an item two listings list is one item, and an item's own edit is
reported whatever happened to how pages' text is taken."""

from __future__ import annotations

import threading
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

import pytest
import pytest_twisted
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.defer import maybe_deferred_to_future

from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler
from tests.conftest import Clock
from tests.crawling import add_on as shared_add_on
from tests.crawling import run_crawl
from tests.crawls.test_postgres_reactor import StatementThreads

DAY = 86_400.0


class Shop:
    """Category listings (``/c/NAME``) of products, each product a link to its own
    page (``/p/ID``: its name and price; 404 once it is no product) with its name
    and price."""

    def __init__(self, products: dict[str, dict[str, Any]], listings: dict[str, list[str]]):
        self.lock = threading.Lock()
        self.products = products
        self.listings = listings
        self.sale_prices: dict[str, str] = {}  # shown by the "sale" listing only
        self.server: LoopbackServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    def listing_urls(self) -> list[str]:
        return [f"{self.url}/c/{name}" for name in self.listings]

    def html(self, name: str) -> str | None:
        with self.lock:
            if name not in self.listings:
                return None
            prices = self.sale_prices if name == "sale" else {}
            rows = "".join(
                f'<li class="product"><a href="/p/{pid}">{escape(self.products[pid]["name"])}</a>'
                f' <span class="price">{prices.get(pid, self.products[pid]["price"])}</span></li>'
                for pid in self.listings[name]
            )
        main = f"<main><h1>{name}</h1><ul>{rows}</ul></main>"
        return f"<!doctype html><html><body>{main}</body></html>"

    def product_html(self, pid: str) -> str | None:
        with self.lock:
            if pid not in self.products:
                return None
            product = self.products[pid]
        main = f"<main><h1>{escape(product['name'])}</h1><p>{product['price']}</p></main>"
        return f"<!doctype html><html><body>{main}</body></html>"

    def __enter__(self) -> Shop:
        shop = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                path = urlsplit(self.path).path
                body = None
                if path.startswith("/c/"):
                    body = shop.html(path[3:])
                elif path.startswith("/p/"):
                    body = shop.product_html(path[3:])
                if body is None:
                    self.send_body(404, b"not found", "text/plain")
                else:
                    self.send_body(200, body.encode(), "text/html; charset=utf-8")

        self.server = LoopbackServer(Handler)
        self.server.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self.server is not None
        self.server.stop()


class Listings(scrapy.Spider):
    """A project's spider: each listing's products as items named by their own URL,
    with the listing they were found in."""

    name = "listings"

    def __init__(self, urls: list[str], product_pages: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls
        self.product_pages = product_pages  # each product's page too, an item of its own

    def parse(self, response: Any) -> Any:
        for product in response.css("li.product"):
            href = product.css("a::attr(href)").get()
            yield {
                "url": response.urljoin(href),
                "name": product.css("a::text").get(),
                "price": product.css("span.price::text").get(),
                "category": urlsplit(response.url).path.rsplit("/", 1)[-1],
            }
            if self.product_pages:
                yield response.follow(href, callback=self.product)

    def product(self, response: Any) -> Any:
        yield {
            "url": response.url,
            "name": response.css("h1::text").get(),
            "price": response.css("p::text").get(),
            "category": "",
        }


def add_on(db: str, clock: Clock, **more: Any) -> dict[str, Any]:
    # The listings answer in the order they are asked, unless a test says otherwise.
    return shared_add_on(db, clock, **{"CONCURRENT_REQUESTS": 1, **more})


async def crawl(
    settings: dict[str, Any], urls: list[str], stats: dict[str, Any] | None = None, **args: Any
) -> list[dict[str, Any]]:
    """The items delivered; *stats* gets the crawl's stats."""
    crawler = Crawler(Listings, Settings(settings))
    items: list[dict[str, Any]] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    await crawler.crawl(urls=urls, **args)
    if stats is not None and crawler.stats is not None:
        stats.update(crawler.stats.get_stats())
    return items


def changes(items: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    return sorted(
        (item["change"], urlsplit(item["url"]).path, item.get("changed_fields", []))
        for item in items
    )


@pytest.mark.parametrize("keyed", [False, True])
@pytest_twisted.ensureDeferred
async def test_an_items_edit_is_reported_across_a_change_of_how_text_is_taken(
    tmp_path: Any, clock: Clock, keyed: bool
) -> None:
    # How pages' text is taken changed (a setting here; an upgrade of trafilatura or
    # the markdown converter alike): the pages' next fingerprints are new baselines.
    # An item's fields never pass through those libraries: its edit is a change.
    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    key = {"INCRECRAWL_ITEM_KEY": ["name"]} if keyed else {}
    with Shop(products, {"shoes": ["1", "2", "3"]}) as shop:
        settings = add_on(str(tmp_path / "s.sqlite"), clock, **key)
        first = await crawl(settings, shop.listing_urls())
        assert changes(first) == [("new", f"/p/{n}", []) for n in ("1", "2", "3")]
        with shop.lock:
            products["2"]["price"] = "25.00"
        clock.advance(2 * DAY)
        other_way = {**settings, "INCRECRAWL_MAIN_CONTENT": False}
        second = await crawl(other_way, shop.listing_urls())
        assert changes(second) == [("changed", "/p/2", [] if keyed else ["price"])]
        clock.advance(2 * DAY)
        assert await crawl(other_way, shop.listing_urls()) == []


@pytest_twisted.ensureDeferred
async def test_an_item_two_listings_list_is_one_item(tmp_path: Any, clock: Clock) -> None:
    # A shoe in "shoes" and in "sale": the same URL field from two responses of a
    # run, the listing it was found in differs. It is one item, whichever listing
    # answers first: new once, then nothing while the shop is unchanged (its
    # schedule learns no change), then its price edit once.
    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    with Shop(products, {"shoes": ["1", "2", "3"], "sale": ["2"]}) as shop:
        settings = add_on(str(tmp_path / "s.sqlite"), clock)
        urls = shop.listing_urls()
        first = await crawl(settings, urls)
        assert changes(first) == [("new", f"/p/{n}", []) for n in ("1", "2", "3")]
        for run in range(4):  # the listings answer in one order, then the other
            clock.advance(2 * DAY)
            stats: dict[str, Any] = {}
            assert await crawl(settings, urls[:: -1 if run % 2 == 0 else 1], stats) == []
            assert "increcrawl/changed" not in stats, run
            assert stats["increcrawl/items/listed_again"] == 1
        with shop.lock:
            products["2"]["price"] = "15.00"
        clock.advance(2 * DAY)
        edited = await crawl(settings, urls[::-1])
        assert changes(edited) == [("changed", "/p/2", ["price"])]
        assert edited[0]["price"] == "15.00"
        clock.advance(2 * DAY)
        assert await crawl(settings, urls) == []
        # An edit only one listing shows is the item's edit too, whichever listing
        # answers first (one order, then the other).
        for order, price in ((1, "12.00"), (-1, "11.00")):
            with shop.lock:
                shop.sale_prices["2"] = price
            clock.advance(2 * DAY)
            edited = await crawl(settings, urls[::order])
            assert changes(edited) == [("changed", "/p/2", ["price"])], order
            assert (edited[0]["price"], edited[0]["category"]) == (price, "sale")
            clock.advance(2 * DAY)
            assert await crawl(settings, urls[::order]) == []
            assert await crawl(settings, urls[::-order]) == []


@pytest_twisted.ensureDeferred
async def test_an_item_on_its_own_page_and_a_listing_is_one_item_gone_once(
    tmp_path: Any, clock: Clock
) -> None:
    # A listing names each product by its page, and the spider fetches that page
    # too: its item there is another version of the same item (its own page's,
    # whose requests are kept). One item: new once, nothing while the shop is
    # unchanged, and once deleted (the listing no longer lists it, its page answers
    # 404) gone once, not once a version.
    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    with Shop(products, {"shoes": ["1", "2", "3"]}) as shop:
        settings = add_on(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=4)
        urls = shop.listing_urls()
        first = await crawl(settings, urls, product_pages=True)
        assert changes(first) == [("new", f"/p/{n}", []) for n in ("1", "2", "3")]
        clock.advance(2 * DAY)
        assert await crawl(settings, urls, product_pages=True) == []
        with shop.lock:
            del products["2"]
            shop.listings["shoes"].remove("2")
        later = []
        for _ in range(4):  # until its page, no longer linked, is checked
            clock.advance(2 * DAY)
            later += await crawl(settings, urls, product_pages=True)
        assert changes(later) == [("gone", "/p/2", [])]


@pytest.mark.timeout(60)
@pytest_twisted.ensureDeferred
async def test_a_failed_read_of_the_first_listings_page_lets_the_second_go_on(
    tmp_path: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The second listing's version waits for the first's read of the page's memory:
    # a read that fails wakes it all the same (else the crawl never ends).
    from twisted.internet import reactor
    from twisted.internet.task import deferLater

    from increcrawl_scrapy.pages.versions import PageVersions

    read = PageVersions.memory
    failed: list[str] = []

    async def failing(self: PageVersions, url: str, key: str | None = None) -> bytes | None:
        if url.endswith("/p/2") and not failed:
            failed.append(url)
            await maybe_deferred_to_future(deferLater(reactor, 0.5, lambda: None))
            raise RuntimeError("the state did not answer")
        return await read(self, url, key)

    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    with Shop(products, {"shoes": ["1", "2", "3"], "sale": ["2"]}) as shop:
        settings = add_on(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=2)
        monkeypatch.setattr(PageVersions, "memory", failing)
        items = await crawl(settings, shop.listing_urls())
    assert failed
    # The failed listing's items are lost with its response; the other's are there.
    assert ("new", "/p/2", []) in changes(items)


@pytest_twisted.ensureDeferred
async def test_an_item_two_listings_list_on_a_shared_state(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its versions are kept in the state off the reactor's thread; and it is still
    # one item, an edit once.
    threads = StatementThreads(monkeypatch)
    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    with Shop(products, {"shoes": ["1", "2", "3"], "sale": ["2"]}) as shop:
        settings = add_on(postgres_dsn, clock)
        urls = shop.listing_urls()
        assert len(await crawl(settings, urls)) == 3
        clock.advance(2 * DAY)
        assert await crawl(settings, urls[::-1]) == []
        with shop.lock:
            shop.sale_prices["2"] = "12.00"
        clock.advance(2 * DAY)
        edited = await crawl(settings, urls)
        threads.watching = False
    assert changes(edited) == [("changed", "/p/2", ["price"])]
    assert threads.on_reactor == []


class TwoWays(scrapy.Spider):
    """A product two listings list, each its own way (the listing it was found in)."""

    name = "two_ways"

    def __init__(self, site: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.site = site

    async def start(self) -> Any:
        for path in ("/a", "/b"):
            yield scrapy.Request(self.site + path)

    def parse(self, response: Any) -> Any:
        for product in response.css("div.p"):
            yield {
                "url": self.site + "/p/1",
                "name": "Widget",
                "found_in": product.attrib["data-where"],
                "price": product.attrib.get("data-price", "9.99"),
            }


@pytest_twisted.ensureDeferred
async def test_a_listing_missing_for_a_run_leaves_its_way_known(
    tmp_path: Any, clock: Clock
) -> None:
    """A listing that failed once (a 503) is not seen that run: the way it shows the
    item stays known, and the next run that sees it again delivers nothing. Before,
    that run's memory kept the other listing's way only, and the product came out
    ``changed`` (found_in) though nothing on the site changed."""
    from tests.embedding.test_unreached_answers import Site

    def listing(name: str) -> tuple[int, str, dict[str, str]]:
        return 200, f'<html><body><div class="p" data-where="{name}">W</div></body></html>', {}

    site = Site()
    try:
        settings = add_on(str(tmp_path / "s.sqlite"), clock, RETRY_TIMES=0)
        delivered = []
        for run in (1, 2, 3):
            site.routes["/a"] = listing("a")
            site.routes["/b"] = (503, "down", {}) if run == 2 else listing("b")
            done = await run_crawl(settings, spider_class=TwoWays, site=site.url(""))
            delivered.append([(item["change"], item["found_in"]) for item in done.items])
            clock.advance(3 * DAY)
        assert len(delivered[0]) == 1 and delivered[0][0][0] == "new"
        assert delivered[1:] == [[], []]
    finally:
        site.server.shutdown()
        site.server.server_close()


@pytest_twisted.ensureDeferred
async def test_a_way_carried_over_then_changed_and_reverted_is_delivered_each_time(
    tmp_path: Any, clock: Clock
) -> None:
    """The way a missing listing showed an item is carried over only until a new way
    is seen: the sale price changed, then back, is a change both times."""
    from tests.embedding.test_unreached_answers import Site

    def listing(name: str, price: str) -> tuple[int, str, dict[str, str]]:
        div = f'<div class="p" data-where="{name}" data-price="{price}">W</div>'
        return 200, f"<html><body>{div}</body></html>", {}

    site = Site()
    sale = {1: "8.99", 2: None, 3: "7.99", 4: "8.99"}  # the sale listing, run by run
    try:
        settings = add_on(str(tmp_path / "s.sqlite"), clock, RETRY_TIMES=0)
        delivered = []
        for price in sale.values():
            site.routes["/a"] = listing("a", "9.99")
            site.routes["/b"] = (503, "down", {}) if price is None else listing("b", price)
            done = await run_crawl(settings, spider_class=TwoWays, site=site.url(""))
            delivered.append([(item["change"], item["price"]) for item in done.items])
            clock.advance(3 * DAY)
        assert delivered[1:] == [[], [("changed", "7.99")], [("changed", "8.99")]]
    finally:
        site.server.shutdown()
        site.server.server_close()


class Unnamed(scrapy.Spider):
    """The tutorial's shape: a listing's items without a URL (the listing's own), and
    a request for each product's page, whose answer gives nothing."""

    name = "unnamed"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        for product in response.css("li.product"):
            yield {"name": product.css("a::text").get()}
            yield response.follow(product.css("a::attr(href)").get(), callback=self.nothing)

    def nothing(self, response: Any) -> Any:
        return []


@pytest_twisted.ensureDeferred
async def test_a_library_failing_on_a_listings_text_loses_none_of_its_items(
    tmp_path: Any, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Which of the links a response led to are its own is told by its main content's
    text: a library failing on that text (a converter refusing the markup) raised
    out of the add-on's middleware, and the listing's items were never delivered.
    Every link is then the page's own, as for a body with no text."""
    from increcrawl_scrapy.content import page_text as module

    convert = module.html_to_markdown

    def failing(html: str | bytes) -> str:
        if "Shoe" in str(html):  # the shop's pages, not the text scheme's samples
            raise RuntimeError("a converter's fault")
        return convert(html)

    monkeypatch.setattr(module, "html_to_markdown", failing)
    products = {str(n): {"name": f"Shoe {n}", "price": f"{n}0.00"} for n in range(1, 4)}
    with Shop(products, {"shoes": ["1", "2", "3"]}) as shop:
        settings = add_on(str(tmp_path / "s.sqlite"), clock)
        crawler = Crawler(Unnamed, Settings(settings))
        items: list[dict[str, Any]] = []
        crawler.signals.connect(
            lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
        )
        await crawler.crawl(urls=shop.listing_urls())
        stats = crawler.stats.get_stats() if crawler.stats is not None else {}
    assert sorted(item["name"] for item in items) == ["Shoe 1", "Shoe 2", "Shoe 3"]
    assert {item["change"] for item in items} == {"new"}
    assert not [key for key in stats if key.startswith("spider_exceptions")]
    assert stats["increcrawl/pages/content_failed"] == 1  # counted, as the spider counts it
