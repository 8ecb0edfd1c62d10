"""Listing pages' edge cases (issue #50, item 12; the review of the branch): a
listing fetched twice in a run (a login), two spiders on one state, a callback
renamed, an item built across two pages, an item moving into a category page that
was empty, and a run that starts late (``pages/listings.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from tests.embedding.small_site import DAY, SiteSpider, small_site
from tests.support.nginx import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


# A login: the form posts, the site sets a session cookie and redirects home, which
# then lists the members' pages. The home page is asked twice in a run.
LOGIN = (
    'location = /login { if ($request_method = POST) { add_header Set-Cookie "session=ok; '
    'Path=/"; return 302 /; } try_files /login.html =404; } '
    "location = / { if ($cookie_session = ok) { rewrite ^ /members.html last; } "
    "rewrite ^ /visitor.html last; }"
)


class MembersSpider(SiteSpider):
    name = "members"

    def parse(self, response: Any) -> Any:
        if response.css("a.logout"):
            yield from response.follow_all(css="a.item", callback=self.parse_item)
        else:
            yield response.follow("/login", callback=self.login)

    def login(self, response: Any) -> Any:
        yield scrapy.FormRequest(response.urljoin("/login"), formdata={"user": "u"})

    def parse_item(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}


@pytest_twisted.ensureDeferred
async def test_a_listing_asked_again_after_a_login_is_fetched_again(tmp_path: Path) -> None:
    with small_site(tmp_path, LOGIN) as site:
        site.set("/visitor.html", '<a href="/login">log in</a>')
        site.set(
            "/members.html",
            '<a class="logout" href="/out">out</a> <a class="item" href="/m/1.html">1</a> '
            '<a class="item" href="/m/2.html">2</a>',
        )
        site.set("/login.html", '<form method="post" action="/login"><input name="user"></form>')
        for n in (1, 2):
            site.set(f"/m/{n}.html", f"<h1>member {n}</h1>")
        urls = {f"{site.url}/m/{n}.html" for n in (1, 2)}
        first = await site.run(MembersSpider, 0)
        assert first.fetched.count("/") == 2, first.fetched  # as a visitor, then a member
        assert {url for change, url in first.changes() if change == "new"} == urls
        # The home page's latest version is its memory: a run it is not due replays
        # the members' pages.
        site.set("/m/1.html", "<h1>member 1, edited</h1>")
        later = await site.run(MembersSpider, 1.5)
        assert later.changes() == [("changed", f"{site.url}/m/1.html")], later.fetched


class PostsSpider(CrawlSpider, SiteSpider):
    name = "posts"
    rules = (Rule(LinkExtractor(allow=[r"/p/\d+\.html$"]), callback="parse_post"),)

    def parse_post(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}


class AuthorsSpider(SiteSpider):
    name = "authors"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.author", callback=self.parse_author)

    def parse_author(self, response: Any) -> Any:
        yield {"url": response.url, "bio": response.css("p::text").get()}


class ProfilesSpider(SiteSpider):
    """The ``authors`` spider's next version: its callback renamed."""

    name = "authors"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.author", callback=self.parse_profile)

    def parse_profile(self, response: Any) -> Any:
        yield {"url": response.url, "bio": response.css("p::text").get()}


def _home_of_posts_and_authors(site: Any) -> None:
    site.set(
        "/",
        '<a href="/p/1.html">p1</a> <a href="/p/2.html">p2</a> '
        '<a class="author" href="/a/ann.html">Ann</a> <a class="author" href="/a/bob.html">Bob</a>',
    )
    for n in (1, 2):
        site.set(f"/p/{n}.html", f"<h1>post {n}</h1>")
    for name in ("ann", "bob"):
        site.set(f"/a/{name}.html", f"<p>{name} writes.</p>")


@pytest_twisted.ensureDeferred
async def test_two_spiders_on_one_state_each_get_their_pages(tmp_path: Path) -> None:
    # One INCRECRAWL_DB for a project's spiders; both start at the home page, a
    # listing of `posts` whose requests `authors` cannot make (not its callbacks).
    with small_site(tmp_path) as site:
        _home_of_posts_and_authors(site)
        posts = await site.run(PostsSpider, 0)
        assert len(posts.changes()) == 2
        authors = await site.run(AuthorsSpider, 1 / 24)
        assert authors.changes() == [
            ("new", f"{site.url}/a/ann.html"),
            ("new", f"{site.url}/a/bob.html"),
        ], authors.fetched


@pytest_twisted.ensureDeferred
async def test_a_listing_whose_callbacks_were_renamed_is_fetched(tmp_path: Path) -> None:
    with small_site(tmp_path) as site:
        _home_of_posts_and_authors(site)
        await site.run(AuthorsSpider, 0)
        site.set("/a/ann.html", "<p>ann writes and edits.</p>")
        # The next version of the spider, the home page not due: its kept requests
        # name a callback the spider has no more, so it is fetched, not skipped.
        later = await site.run(ProfilesSpider, 2 / 24)
        assert "/" in later.fetched, later.fetched
        assert later.stats.get("increcrawl/replayed") is None, later.stats


ALWAYS_200 = "location ~ specs { etag off; if_modified_since off; }"


class ProductSpider(SiteSpider):
    """An item built across two pages: the product page passes it half built on to
    its specs page, which yields it."""

    name = "products"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.product", callback=self.parse_product)

    def parse_product(self, response: Any) -> Any:
        item = {"name": response.css("h1::text").get(), "price": response.css("b::text").get()}
        yield response.follow("specs.html", callback=self.parse_specs, cb_kwargs={"item": item})

    def parse_specs(self, response: Any, item: dict[str, Any]) -> Any:
        yield {**item, "url": response.url, "weight": response.css("i::text").get()}


@pytest_twisted.ensureDeferred
async def test_a_page_that_passes_an_item_on_is_no_listing(tmp_path: Path) -> None:
    # The specs page answers 200 to a conditional request: a 304 would keep the old
    # item whatever its request passes on (not the listings' doing).
    with small_site(tmp_path, ALWAYS_200) as site:
        site.set("/", '<a class="product" href="/p/1/">P1</a>')
        site.set("/p/1/specs.html", "<i>2 kg</i>")
        delivered = None
        for day in range(10):
            price = "10" if day < 4 else "12"
            site.set("/p/1/", f"<h1>P1</h1><b>{price}</b>")
            run = await site.run(ProductSpider, day)
            if day == 0:  # the home page only: the product page's data is its content
                assert run.stats.get("increcrawl/pages/listings/new") == 1, run.stats
            if day >= 4 and delivered is None and "/p/1/specs.html" in run.fetched:
                # The item read again once its price changed: delivered changed, not
                # unchanged with the old price of a replayed request.
                assert run.changes("price") == [("changed", "12")], (day, run.fetched)
                delivered = day


NAV = '<a class="cat" href="/cat/a/">A</a> <a class="cat" href="/cat/b/">B</a>'


class ShopSpider(SiteSpider):
    """Category pages of one callback; a product's item is its category page's."""

    name = "shop"

    def parse(self, response: Any) -> Any:
        yield from response.follow_all(css="a.cat", callback=self.parse_category)

    def parse_category(self, response: Any) -> Any:
        for product in response.css("div.p"):
            yield {"name": product.attrib["data-name"], "price": product.css("::text").get()}
        yield from response.follow_all(css="a.cat", callback=self.parse_category)


def _category(products: dict[str, str]) -> str:
    return NAV + "".join(f'<div class="p" data-name="{n}">{p}</div>' for n, p in products.items())


@pytest_twisted.ensureDeferred
async def test_an_item_moving_into_a_category_empty_before_is_never_gone(tmp_path: Path) -> None:
    # Category B is empty on its first fetches (links only, as a listing): it is a
    # page of items all the same, its callback yields them on A.
    with small_site(tmp_path) as site:
        site.set("/", NAV)
        a, b = {"X": "10", "Y": "20"}, {}
        for day in range(4):
            a["X"] = str(10 + day)  # A changes daily
            if day == 2:
                b["Y"] = a.pop("Y")  # Y moves into B, unchanged
            site.set("/cat/a/", _category(a))
            site.set("/cat/b/", _category(b))
            run = await site.run(ShopSpider, day)
            assert ("gone", "Y") not in run.changes("name"), (day, run.fetched)


@pytest_twisted.ensureDeferred
async def test_a_listing_fetched_by_a_late_run_waits_no_longer_than_its_bound(
    tmp_path: Path,
) -> None:
    # Daily runs at midnight, the first one two hours late; every page's schedule
    # wants 10 days: only the listings' bound brings the home page back.
    with small_site(tmp_path) as site:
        _home_of_posts_and_authors(site)
        fetched = {}
        for day in (2 / 24, 1, 2, 3, 4, 5):
            wait = {"INCRECRAWL_MIN_INTERVAL": 10 * DAY, "INCRECRAWL_DEFAULT_INTERVAL": 10 * DAY}
            run = await site.run(AuthorsSpider, day, **wait)
            fetched[int(day)] = "/" in run.fetched
        assert fetched == {0: True, 1: False, 2: False, 3: False, 4: False, 5: True}, fetched
