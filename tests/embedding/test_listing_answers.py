"""A listing's answers that are not a listing (issue #50, item 12; the second review
of the listings): a home page that sets the cookie the other pages need, a home
page that answers 404 for one run, and listings fetched by a run that does not
skip (``pages/listings.py``)."""

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

HOME = '<a class="p" href="/p/1/">1</a> <a class="p" href="/p/2/">2</a>'


class ShopSpider(SiteSpider):
    name = "shop"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.p", callback=self.parse_product)
        yield from response.follow_all(css="a.next")

    def parse_product(self, response: Any) -> Any:
        yield {"url": response.url, "price": response.css("b::text").get()}


def daily_prices(first: int = 0, days: int = 10, skip: tuple[int, ...] = ()) -> list[Any]:
    """What the feed should say each day while product 1's price changes daily."""
    return [(first, [("new", "10"), ("new", "5")])] + [
        (day, [] if day in skip else [("changed", str(10 + day))]) for day in range(first + 1, days)
    ]


# The home page sets a cookie the products' pages want (a session begun on the
# first visit, an age gate, an anti-bot cookie); without it they answer so.
GATE = (
    'location = / {{ add_header Set-Cookie "visited=1; Path=/"; try_files /index.html =404; }} '
    "location /p/ {{ if ($cookie_visited != 1) {{ return {answer}; }} }}"
)


@pytest.mark.parametrize("answer", ["403", "404", "302 /"])
@pytest_twisted.ensureDeferred
async def test_a_page_that_sets_a_cookie_is_no_listing(tmp_path: Path, answer: str) -> None:
    """Skipped, its links were made again without the cookie its fetch sets: the
    products were delivered gone (404), the home page scraped as a product (302) or
    their edits lost (403)."""
    with small_site(tmp_path, GATE.format(answer=answer)) as site:
        site.set("/", HOME)
        site.set("/p/2/", "<b>5</b>")
        delivered = []
        for day in range(10):
            site.set("/p/1/", f"<b>{10 + day}</b>")
            run = await site.run(ShopSpider, day)
            assert run.fetched[0] == "/", run.answered  # fetched every run, as before
            delivered.append((day, run.changes("price")))
        assert delivered == daily_prices()


@pytest_twisted.ensureDeferred
async def test_a_listing_that_answers_404_once_is_fetched_the_next_run(tmp_path: Path) -> None:
    """Recorded gone with nothing to make again, the home page was skipped for days
    and the run after the 404 fetched nothing."""
    with small_site(tmp_path, "location = / { try_files /index.html =404; }") as site:
        site.set("/p/2/", "<b>5</b>")
        delivered = []
        for day in range(8):
            site.set("/p/1/", f"<b>{10 + day}</b>")
            if day == 3:
                (site.root / "index.html").unlink()  # a deploy's hiccup: one run
            else:
                site.set("/", HOME)
            run = await site.run(ShopSpider, day)
            delivered.append((day, run.changes("price")))
            if day == 4:
                assert "/" in run.fetched, run.answered
        assert delivered == daily_prices(days=8, skip=(3,))


@pytest_twisted.ensureDeferred
async def test_a_run_that_does_not_skip_counts_the_listings_it_fetched(tmp_path: Path) -> None:
    """With INCRECRAWL_SKIP_NOT_DUE turned off after runs with it on, the summary said
    the listings, fetched by that very run, were not reached."""
    with small_site(tmp_path) as site:
        site.set("/", '<a class="p" href="/p/1/">1</a> <a class="next" href="/page/2/">next</a>')
        site.set("/page/2/", '<a class="p" href="/p/2/">2</a>')
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<b>{n}</b>")
        await site.run(ShopSpider, 0)
        site.set("/p/2/", "<b>3</b>")
        run = await site.run(ShopSpider, 1, INCRECRAWL_SKIP_NOT_DUE=False)
        assert sorted(run.fetched) == ["/", "/p/1/", "/p/2/", "/page/2/"]
        assert run.changes("price") == [("changed", "3")]
        summary = [line for line in run.log.splitlines() if "pages with state" in line]
        assert summary and not any("not reached" in line for line in summary), summary
        # Skipping again: the listings were read a day ago, not due.
        again = await site.run(ShopSpider, 1.5)
        assert "/" not in again.fetched and "/page/2/" not in again.fetched, again.answered


# The same gate, from the day a file named ``gate`` is in the site's root (a 304 of
# the home page sets the cookie too).
LATER_GATE = (
    'set $c ""; set $g "${cookie_visited}"; '
    'if (-f $document_root/gate) { set $c "visited=1; Path=/"; set $g "${g}gate"; } '
    "location = / { add_header Set-Cookie $c; try_files /index.html =404; } "
    'location /p/ { if ($g = "gate") { return 403; } }'
)


@pytest_twisted.ensureDeferred
async def test_a_listing_that_begins_to_set_a_cookie_is_fetched_from_then_on(
    tmp_path: Path,
) -> None:
    """A listing's row kept from before its site set cookies: once a fetch shows the
    cookie, it is fetched every run (its replays would ask without it)."""
    with small_site(tmp_path, LATER_GATE) as site:
        site.set("/", HOME)
        site.set("/p/2/", "<b>5</b>")
        shown = None  # the first run that fetched the home page with the gate on
        for day in range(12):
            site.set("/p/1/", f"<b>{10 + day}</b>")
            if day == 3:
                (site.root / "gate").write_text("on")
            run = await site.run(ShopSpider, day)
            assert "gone" not in {change for change, _ in run.changes("price")}, day
            if day < 3:
                continue
            if shown is not None:
                assert run.fetched[0] == "/", (day, run.answered)
                assert run.changes("price") == [("changed", str(10 + day))], day
            elif "/" in run.fetched:
                shown = day
        assert shown is not None and shown < 9, shown


@pytest_twisted.ensureDeferred
async def test_a_listing_that_answers_304_is_counted_a_listing(tmp_path: Path) -> None:
    """Its stat counted only listings read whole, about none once the site sends
    validators."""
    with small_site(tmp_path) as site:
        site.set("/", '<a class="next" href="/c/1/">c</a>')
        site.set("/c/1/", '<a class="p" href="/p/1/">1</a>')
        site.set("/p/1/", "<b>1</b>")
        for day in range(8):
            run = await site.run(ShopSpider, day)
            read = [answer for answer in run.answered if answer.split()[1] in ("/", "/c/1/")]
            listings = sum(value for name, value in run.stats.items() if "pages/listings/" in name)
            assert len(read) == listings, (day, run.answered, run.stats)


class PricedShopSpider(ShopSpider):
    """The project's second spider: the same callbacks' names, the listing's price
    passed on to the product page."""

    name = "priced"

    def parse(self, response: Any) -> Any:
        for link in response.css("a.p"):
            yield response.follow(
                link, self.parse_product, cb_kwargs={"listed": link.attrib["href"]}
            )

    def parse_product(self, response: Any, listed: str) -> Any:  # type: ignore[override]
        yield {"url": response.url, "price": response.css("b::text").get(), "listed": listed}


@pytest_twisted.ensureDeferred
async def test_another_spiders_listing_is_fetched_not_replayed(tmp_path: Path) -> None:
    """Two spiders of a project on one state, their callbacks named alike: the second
    skipped the first one's listing and had its kept requests replayed to its own
    callbacks, which failed (a TypeError: no cb_kwargs)."""
    with small_site(tmp_path) as site:
        site.set("/", HOME)
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<b>{n}</b>")
        await site.run(ShopSpider, 0)
        second = await site.run(PricedShopSpider, 1 / 24)  # run() fails on an ERROR
        assert "/" in second.fetched, second.answered
        first = await site.run(ShopSpider, 2 / 24)
        assert "/" in first.fetched, first.answered


class OtherShopSpider(ShopSpider):
    name = "other"


@pytest_twisted.ensureDeferred
async def test_a_page_of_another_spider_skipped_is_said(tmp_path: Path) -> None:
    """The second spider of a project on the first one's state delivers nothing of
    the pages they share while those are not due: the log says so, once."""
    with small_site(tmp_path) as site:
        site.set("/", HOME)
        for n in (1, 2):
            site.set(f"/p/{n}/", f"<b>{n}</b>")
        await site.run(ShopSpider, 0)
        other = await site.run(OtherShopSpider, 1 / 24)
        said = [
            line
            for line in other.log.splitlines()
            if line.startswith("WARNING") and "is a page of spider 'shop'" in line
        ]
        assert len(said) == 1, said
