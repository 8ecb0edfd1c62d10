"""An item page whose request carries what another page scraped (``cb_kwargs``, meta
of the spider's own): the data passed on is part of its item, so the page is
skipped or asked conditionally only while that data is what it was at its last
fetch (``pages/skip_not_due.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy

from tests.embedding.small_site import small_site
from tests.support.nginx import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


class PricesSpider(scrapy.Spider):
    """The catalogue shows each product's price; the product page its name."""

    name = "prices"
    how = "cb_kwargs"

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [base + "/"]

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
