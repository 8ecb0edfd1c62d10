"""The add-on on a site whose pages answer forms posted to their own URL: a listing
paged by ASP.NET-style postbacks (page 2 and on reached only by a POST of the
listing's form to the same URL, ``__EVENTTARGET`` / ``__EVENTARGUMENT``), a search
form posting to its own page, and a report page that asks to be loaded again (the
spider requests the same URL with ``dont_filter``). With ``INCRECRAWL_SKIP_NOT_DUE``
none of them may be dropped as "fetched just now" or "not due": only a request Scrapy
itself would take for the one that reached a page (its fingerprint) stands for it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from urllib.parse import parse_qs

import pytest
import pytest_twisted
import scrapy
from scrapy.http import FormRequest

from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler
from tests.conftest import Clock
from tests.crawling import CrawlResult, add_on, run_crawl
from tests.crawls.test_postgres_reactor import StatementThreads

DAY = 86_400.0
ROWS_A_PAGE = 3


class PostbackSite:
    """A listing of nine products in three pages (page 1 by GET, the others only by
    postback), a search form that posts to its own page, a report ready on the
    second load of a run."""

    def __init__(self) -> None:
        self.prices = {f"product-{i}": f"{10 + i}.00" for i in range(1, 10)}
        self.lock = threading.Lock()
        self.posts: list[str] = []  # the bodies posted, in order
        self.loads = 0  # the report's loads since the last reset
        self.server = LoopbackServer(self._handler())

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> PostbackSite:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def listing(self, page: int) -> bytes:
        names = sorted(self.prices, key=lambda name: int(name.split("-")[1]))
        rows = names[(page - 1) * ROWS_A_PAGE : page * ROWS_A_PAGE]
        lis = "".join(
            f'<li class="row" data-name="{name}"><span class="price">{self.prices[name]}'
            "</span></li>"
            for name in rows
        )
        pager = (
            f"<a class=\"next\" href=\"javascript:__doPostBack('grid','Page${page + 1}')\" "
            f'data-arg="Page${page + 1}">Next</a>'
            if page * ROWS_A_PAGE < len(names)
            else ""
        )
        return (
            '<html><body><form id="grid" method="post" action="/list">'
            '<input type="hidden" name="__VIEWSTATE" value="dDwtMTI3OTMzNDM4NDs7Pg==">'
            '<input type="hidden" name="__EVENTTARGET" value="">'
            '<input type="hidden" name="__EVENTARGUMENT" value="">'
            f"<main><h1>Products, page {page}</h1><ul>{lis}</ul>{pager}</main>"
            "</form></body></html>"
        ).encode()

    def search(self, query: str | None) -> bytes:
        found = ""
        if query is not None:
            hits = [name for name, price in self.prices.items() if price.startswith(query)]
            found = "".join(
                f'<li class="row" data-name="{name}"><span class="price">{self.prices[name]}'
                "</span></li>"
                for name in sorted(hits)
            )
        return (
            '<html><body><form id="search" method="post" action="/search">'
            '<input type="text" name="q" value=""><input type="submit" value="Search">'
            f"</form><main><ul>{found}</ul></main></body></html>"
        ).encode()

    def report(self) -> bytes:
        with self.lock:
            self.loads += 1
            ready = self.loads % 2 == 0
        body = (
            '<li class="row" data-name="total"><span class="price">99.00</span></li>'
            if ready
            else '<p class="wait">Preparing your report, load the page again.</p>'
        )
        return f"<html><body><main><ul>{body}</ul></main></body></html>".encode()

    def _handler(self) -> type[QuietHandler]:
        site = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                if self.path == "/list":
                    self.send_body(200, site.listing(1), "text/html")
                elif self.path == "/search":
                    self.send_body(200, site.search(None), "text/html")
                elif self.path == "/report":
                    self.send_body(200, site.report(), "text/html")
                else:
                    self.send_body(404, b"not found", "text/plain")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode()
                with site.lock:
                    site.posts.append(f"{self.path}?{body}")
                form = {name: values[0] for name, values in parse_qs(body).items()}
                if self.path == "/list" and form.get("__EVENTTARGET") == "grid":
                    page = int(form.get("__EVENTARGUMENT", "Page$1").split("$")[1])
                    self.send_body(200, site.listing(page), "text/html")
                elif self.path == "/search":
                    self.send_body(200, site.search(form.get("q", "")), "text/html")
                else:
                    self.send_body(400, b"bad postback", "text/plain")

        return Handler


class PostbackSpider(scrapy.Spider):
    """A project's spider: the listing's rows (no URL field: they belong to the
    page they were scraped from), its pager followed by postback; a search for two
    prices; the report loaded again while it is being prepared."""

    name = "postbacks"

    def __init__(self, site: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/list", f"{site}/search", f"{site}/report"]

    async def parse(self, response: Any) -> Any:
        if response.css("form#search"):
            for query in ("11", "15"):
                yield posted(response, "search", {"q": query}, callback=self.rows)
            return
        if response.css("p.wait"):
            yield scrapy.Request(response.url, dont_filter=True)  # Scrapy sends it again
            await asyncio.sleep(0.5)  # other work of the callback's meanwhile
            return
        for item in self.rows(response):
            yield item
        argument = response.css("a.next::attr(data-arg)").get()
        if argument:
            yield posted(response, "grid", {"__EVENTTARGET": "grid", "__EVENTARGUMENT": argument})

    def rows(self, response: Any) -> Any:
        for row in response.css("li.row"):
            yield {"name": row.attrib["data-name"], "price": row.css(".price::text").get()}


def posted(response: Any, form: str, fields: dict[str, str], **kwargs: Any) -> FormRequest:
    """The form's request, its inputs as the page filled them and *fields* set (what
    ``FormRequest.from_response``, deprecated in Scrapy 2.19, or form2request make)."""
    selector = response.css(f"form#{form}")
    data = {i.attrib["name"]: i.attrib.get("value", "") for i in selector.css("input[name]")}
    data.update(fields)
    url = response.urljoin(selector.attrib["action"])
    return FormRequest(url, formdata=data, **kwargs)


def delivered(result: CrawlResult) -> list[tuple[str, str, str]]:
    return sorted((item["name"], item["price"], item["change"]) for item in result.items)


def not_due(result: CrawlResult) -> int:
    return int(result.stats.get("increcrawl/skipped/not_due", 0))


@pytest.fixture(params=["sqlite", "postgres"])
def state_db(request: Any, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "state.sqlite")
    return str(request.getfixturevalue("postgres_dsn"))


@pytest_twisted.ensureDeferred
async def test_postbacks_and_reloads_are_sent_and_their_edits_delivered(
    state_db: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = not state_db.endswith(".sqlite")
    threads = StatementThreads(monkeypatch) if shared else None
    settings = add_on(state_db, clock, LOG_LEVEL="INFO")
    with PostbackSite() as site:
        first = await run_crawl(settings, spider_class=PostbackSpider, site=site.url)
        listed = [(name, price, "new") for name, price in site.prices.items()]
        searched = [("product-1", "11.00", "new"), ("product-5", "15.00", "new")]
        # Every row of every page, the search's answers and the report, once each.
        assert delivered(first) == sorted([*listed, *searched, ("total", "99.00", "new")])
        assert not_due(first) == 0
        assert len(site.posts) == 4  # pages 2 and 3, two searches

        # Every page due: the edits on postback pages, and only they, delivered.
        site.prices["product-5"] = "15.50"  # page 2, and found by "15"
        site.prices["product-1"] = "11.50"  # page 1, and found by "11"
        site.loads = 0
        clock.advance(40 * DAY)
        second = await run_crawl(settings, spider_class=PostbackSpider, site=site.url)
        assert delivered(second) == [
            ("product-1", "11.50", "changed"),  # the listing's page 1
            ("product-1", "11.50", "changed"),  # the search for "11"
            ("product-5", "15.50", "changed"),  # the listing's page 2 (a postback)
            ("product-5", "15.50", "changed"),  # the search for "15"
        ]
        assert not_due(second) == 0

        # An hour later the listing's first page is not due (nor the report): skipped,
        # its postback made again from its kept requests, and page 3's edit delivered.
        site.prices["product-8"] = "28.00"
        site.loads = 0
        clock.advance(3600.0)
        third = await run_crawl(settings, spider_class=PostbackSpider, site=site.url)
        assert delivered(third) == [("product-8", "28.00", "changed")]
        assert not_due(third) == 2  # the listing's first page and the report, only they
        assert len(site.posts) == 12  # every postback and search, each run
    if threads is not None:  # a shared state is read off the reactor's thread
        threads.watching = False
        assert threads.on_reactor == []
