"""An item page whose request carries what another page scraped (``cb_kwargs``, meta
of the spider's own): the data passed on is part of its item, so the page is
skipped or asked conditionally only while that data is what it was at its last
fetch (``pages/skip_not_due.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from tests.embedding.small_site import SiteSpider, small_site
from tests.support.nginx import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


class PricesSpider(SiteSpider):
    """The catalogue shows each product's price; the product page its name."""

    name = "prices"
    how = "cb_kwargs"

    def parse(self, response: Any) -> Any:
        for link in response.css("a.product"):
            price = link.attrib["data-price"]
            if self.how == "meta":
                yield response.follow(link, self.parse_product, meta={"price": price})
            else:
                yield response.follow(link, self.parse_product, cb_kwargs={"price": price})

    def parse_product(self, response: Any, price: str | None = None) -> Any:
        yield {
            "url": response.url,
            "name": response.css("h1::text").get(),
            "price": price if price is not None else response.meta["price"],
        }


class PricesInMetaSpider(PricesSpider):
    how = "meta"


def catalogue(first: str, second: str = "5") -> str:
    return (
        f'<a class="product" href="/p/1/" data-price="{first}">1</a> '
        f'<a class="product" href="/p/2/" data-price="{second}">2</a>'
    )


@pytest.mark.parametrize("spider", [PricesSpider, PricesInMetaSpider])
@pytest_twisted.ensureDeferred
async def test_a_price_passed_on_from_the_catalogue_is_delivered_the_day_it_changes(
    tmp_path: Path, spider: type
) -> None:
    """The product page not due was skipped (or answered 304) and the new price
    passed to it was never delivered until the page itself changed."""
    with small_site(tmp_path) as site:
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<h1>Product {n}</h1>")
        delivered = []
        for day in range(8):
            site.set("/", catalogue("12" if day >= 3 else "10"))
            run = await site.run(spider, day)
            delivered.append((day, run.changes("price")))
        assert delivered[0] == (0, [("new", "10"), ("new", "5")])
        assert delivered[3] == (3, [("changed", "12")]), delivered
        assert all(changes == [] for day, changes in delivered[1:] if day != 3), delivered
        # Unchanged data: the product pages are skipped as before.
        assert "/p/2/" not in run.fetched, run.answered


class CategoriesSpider(SiteSpider):
    """Two category pages list the same products and pass on their name: Scrapy
    sends the first request to a product and drops the other as a duplicate, so the
    product is reached from either category, as the category pages answer."""

    name = "categories"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.cat", callback=self.parse_category)

    def parse_category(self, response: Any) -> Any:
        name = response.css("h1::text").get()
        for link in response.css("a.p"):
            yield response.follow(link, self.parse_product, cb_kwargs={"category": name})

    def parse_product(self, response: Any, category: str) -> Any:
        yield {"url": response.url, "name": response.css("h1::text").get(), "category": category}


@pytest_twisted.ensureDeferred
async def test_a_product_two_categories_reach_is_not_changed_by_the_order_they_answer(
    tmp_path: Path,
) -> None:
    """The category whose request reached a product first differed from run to run
    (replays are made in another order than fetches): each time, the product was
    fetched whole for data passed on that was not its last fetch's, and delivered
    changed, on a site that never changed. Each category's data is kept apart."""
    products = "".join(f'<a class="p" href="/p/{n}/">{n}</a>' for n in range(1, 6))
    with small_site(tmp_path) as site:
        site.set("/", '<a class="cat" href="/c/a/">a</a> <a class="cat" href="/c/b/">b</a>')
        site.set("/c/a/", "<h1>Alpha</h1>" + products)
        site.set("/c/b/", "<h1>Beta</h1>" + products)
        for n in range(1, 6):
            site.set(f"/p/{n}/", f"<h1>Product {n}</h1>")
        later: list[tuple[str, Any]] = []
        for day in range(12):
            run = await site.run(CategoriesSpider, day)
            if day:
                later += [(item["url"], item["category"]) for item in run.items]
        # A category's data seen first is read with its product, once: the product
        # then shows it (the spider's own choice of the first to answer), and
        # whichever answers first afterwards changes nothing.
        assert len(later) == len(set(url for url, _ in later)), later


class RowSpider(SiteSpider):
    """Each catalogue row goes on to its product page as an object: a Selector (its
    repr shows 40 characters), the catalogue's response (its repr its URL), or data
    whose keys JSON cannot sort."""

    name = "rows"
    how = "selector"

    def parse(self, response: Any) -> Any:
        for row in response.css("div.row"):
            price = row.css("span.price::text").get()
            passed = {
                "selector": row,
                "response": response,
                "tuple-keys": {("price", "EUR"): price},
                "mixed-keys": {1: price, "currency": "EUR"},
            }[self.how]
            href = row.css("a::attr(href)").get()
            yield response.follow(href, self.parse_product, cb_kwargs={"row": passed})

    def parse_product(self, response: Any, row: Any) -> Any:
        if self.how == "selector":
            price = row.css("span.price::text").get()
        elif self.how == "response":
            path = response.url.split("/", 3)[3]
            price = row.css(f"div.row:has(a[href='/{path}']) span.price::text").get()
        else:
            price = row[("price", "EUR")] if self.how == "tuple-keys" else row[1]
        yield {"url": response.url, "name": response.css("h1::text").get(), "price": price}


def rows(first: str) -> str:
    return (
        '<div class="row"><a href="/p/1/">A product with a long name</a> '
        f'<span class="price">{first}</span></div>'
        '<div class="row"><a href="/p/2/">Another product, long name too</a> '
        '<span class="price">5</span></div>'
    )


@pytest.mark.parametrize("how", ["selector", "response", "tuple-keys", "mixed-keys"])
@pytest_twisted.ensureDeferred
async def test_data_passed_on_as_objects_is_delivered_when_it_changes(
    tmp_path: Path, how: str
) -> None:
    """An object's repr hid the price it carries (the product page skipped), and keys
    JSON cannot sort failed the request (nothing fetched)."""
    spider = type(f"Row{how.title()}Spider", (RowSpider,), {"how": how})
    with small_site(tmp_path) as site:
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<h1>Product {n}</h1>")
        delivered = []
        for day in range(5):
            site.set("/", rows("12" if day >= 3 else "10"))
            run = await site.run(spider, day)
            delivered.append((day, run.changes("price")))
        assert delivered[0] == (0, [("new", "10"), ("new", "5")]), delivered
        assert delivered[3] == (3, [("changed", "12")]), delivered
        assert all(changes == [] for day, changes in delivered[1:] if day != 3), delivered


class CatalogueSpider(SiteSpider):
    """The home page links the catalogue, which passes each product's price on."""

    name = "catalogue"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.cat", callback=self.parse_catalogue)

    def parse_catalogue(self, response: Any) -> Any:
        for row in response.css("li"):
            price = row.css("span::text").get()
            yield response.follow(row.css("a")[0], self.parse_product, cb_kwargs={"price": price})

    def parse_product(self, response: Any, price: str) -> Any:
        yield {"url": response.url, "name": response.css("h1::text").get(), "price": price}


def listed(price: str) -> str:
    return "".join(f'<li><a href="/p/{n}/">{n}</a> <span>{price}</span></li>' for n in (1, 2))


@pytest.mark.parametrize("story", ["catalogue moved", "recorded without skipping"])
@pytest_twisted.ensureDeferred
async def test_data_from_a_page_not_seen_before_is_read_with_its_item(
    tmp_path: Path, story: str
) -> None:
    """A source the page's memory did not know was no evidence: the page was asked
    conditionally, answered 304 for ever, and the source's data never recorded, so a
    later price change was never delivered (and so on a state of an earlier version,
    which kept no data passed on)."""
    with small_site(tmp_path) as site:
        site.set("/", '<a class="cat" href="/cat/">all</a>')
        for path in ("/cat/", "/catalogue/"):
            site.set(path, listed("10"))
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<h1>Product {n}</h1>")
        if story == "recorded without skipping":
            for day in range(2):
                await site.run(CatalogueSpider, day, INCRECRAWL_SKIP_NOT_DUE=False)
            await site.run(CatalogueSpider, 2)
        else:
            for day in range(3):
                await site.run(CatalogueSpider, day)
            site.set("/", '<a class="cat" href="/catalogue/">all</a>')  # moved
            moved = await site.run(CatalogueSpider, 3)
            assert moved.changes("price") == [], moved.answered  # the same price
        for path in ("/cat/", "/catalogue/"):
            site.set(path, listed("12"))
        run = await site.run(CatalogueSpider, 5)
        assert run.changes("price") == [("changed", "12")] * 2, run.answered
