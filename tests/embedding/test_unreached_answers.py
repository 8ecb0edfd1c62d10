"""What a direct check of a page no link leads to any more (``pages/unreached.py``)
takes an answer for, in the stories a fresh review found: a redirect to the page's
own URL spelt otherwise is no move, a status the spider handles itself is no
deletion, and a request kept under another spelling of the page's URL is the one
sent (a bare GET's 404 proves nothing, so the deleted page was never gone). And the
stories of the same review around them: a product page a listing lists too, a page
asked again by a project without a duplicate filter."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import pytest_twisted
import scrapy

from tests.conftest import Clock
from tests.crawling import PagesSpider, add_on, run_crawl

DAY = 86_400.0
Route = tuple[int, str, dict[str, str]]


class Site:
    """A loopback site of *routes* (path -> status, body, headers); 404 elsewhere."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.asked: list[str] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                site.asked.append(self.path)
                status, body, headers = site.routes.get(self.path, (404, "<p>nf</p>", {}))
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"


@pytest.fixture
def site() -> Iterator[Site]:
    served = Site()
    yield served
    served.server.shutdown()
    served.server.server_close()


def home(*links: str) -> Route:
    anchors = "".join(f'<a href="{link}">{link}</a>' for link in links)
    return 200, f"<html><body><h1>Home</h1>{anchors}</body></html>", {}


def checks(tmp_path: Path, clock: Clock) -> dict[str, Any]:
    return add_on(str(tmp_path / "state.sqlite"), clock, LOG_LEVEL="INFO", RETRY_TIMES=0)


async def runs(
    settings: dict[str, Any],
    clock: Clock,
    count: int,
    between: Callable[[int], None],
    every: float,
    **crawl: Any,
) -> list[list[tuple[str, str]]]:
    """*count* crawls *every* seconds apart, *between(run)* before each: what each
    delivered (change, url)."""
    delivered = []
    for run in range(1, count + 1):
        between(run)
        done = await run_crawl(settings, **crawl)
        delivered.append([(item["change"], item["url"]) for item in done.items])
        clock.advance(every)
    return delivered


@pytest_twisted.ensureDeferred
async def test_a_redirect_to_the_pages_own_url_spelt_otherwise_is_no_move(
    tmp_path: Path, clock: Clock, site: Site
) -> None:
    story: Route = (200, "<html><body><h1>Story one</h1></body></html>", {})

    def between(run: int) -> None:
        if run == 1:
            site.routes.update({"/": home("/news/1/"), "/news/1/": story})
        if run == 2:  # off the front page, still online; its URL canonicalized
            site.routes["/"] = home()
            site.routes["/news/1/"] = (301, "", {"Location": site.url("/news/1")})
            site.routes["/news/1"] = story

    delivered = await runs(
        checks(tmp_path, clock), clock, 5, between, 2 * DAY,
        spider_class=PagesSpider, urls=[site.url("/")],
    )  # fmt: skip
    assert "/news/1/" in site.asked[3:]  # checked directly
    assert [change for run in delivered for change, _ in run if change == "gone"] == []


class HandlesItsNotFound(scrapy.Spider):
    """A site whose living pages answer 404, and a spider that takes them as pages."""

    name = "handles_404"
    handle_httpstatus_list: ClassVar[list[int]] = [404]

    def __init__(self, home: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [home]

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}
        yield from response.follow_all(css="a")


@pytest_twisted.ensureDeferred
async def test_a_status_the_spider_handles_is_no_deletion(
    tmp_path: Path, clock: Clock, site: Site
) -> None:
    def between(run: int) -> None:
        if run == 1:
            site.routes["/"] = home("/x")
            site.routes["/x"] = (404, "<html><body><h1>Living page</h1></body></html>", {})
        if run == 2:
            site.routes["/"] = home()

    delivered = await runs(
        checks(tmp_path, clock), clock, 5, between, 2 * DAY,
        spider_class=HandlesItsNotFound, home=site.url("/"),
    )  # fmt: skip
    assert site.asked.count("/x") >= 2  # checked directly
    assert [change for run in delivered for change, _ in run if change == "gone"] == []


@pytest_twisted.ensureDeferred
async def test_a_request_kept_under_another_spelling_is_the_one_sent(
    tmp_path: Path, clock: Clock, site: Site
) -> None:
    story: Route = (200, "<html><body><h1>Story</h1></body></html>", {})

    def between(run: int) -> None:
        if run == 1:
            site.routes.update({"/": home("/n/1/"), "/n/1/": story, "/n/1": story})
        if run == 2:  # the same page, linked without its slash
            site.routes["/"] = home("/n/1")
        if run == 3:  # deleted, and no link to it any more
            site.routes["/"] = home()
            del site.routes["/n/1/"], site.routes["/n/1"]

    delivered = await runs(
        checks(tmp_path, clock), clock, 8, between, 3 * DAY,
        spider_class=PagesSpider, urls=[site.url("/")],
    )  # fmt: skip
    gone = [url for run in delivered[2:] for change, url in run if change == "gone"]
    assert len(gone) == 1 and gone[0].rstrip("/").endswith("/n/1")


class ListedAndOwn(scrapy.Spider):
    """A listing naming its products by their URL field, and each product's own page
    yielding the same item (identical: the listing's version and the page's own)."""

    name = "listed_and_own"

    def __init__(self, home: str, product: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.home, self.product = home, product

    async def start(self) -> Any:
        yield scrapy.Request(self.home)
        if self.product:  # the product page asked for itself too
            yield scrapy.Request(self.product, callback=self.detail)

    def parse(self, response: Any) -> Any:
        for link in response.css("a.p"):
            url = response.urljoin(link.attrib["href"])
            yield {"url": url, "name": link.css("::text").get()}
            yield scrapy.Request(url, callback=self.detail)

    def detail(self, response: Any) -> Any:
        yield {"url": response.url, "name": response.css("h1::text").get()}


@pytest.mark.parametrize("asked", ["by the listing", "by itself too"])
@pytest_twisted.ensureDeferred
async def test_a_product_a_listing_lists_too_is_gone_once_deleted(
    tmp_path: Path, clock: Clock, site: Site, asked: str
) -> None:
    """Its page's own memory (its requests, the request that reached it, its items
    its own) is kept whichever version came first or alone: before, the listing's
    identical version (or the listing alone, the product page not due) made it a
    listing's, and the product's 404 was ignored for ever."""
    steps = {1: 0.0, 2: 3600.0, 3: 30 * DAY, 4: 30 * DAY, 5: 30 * DAY}
    product = site.url("/p/1") if asked == "by itself too" else ""
    delivered = []
    for run in range(1, 6):
        clock.advance(steps[run])
        if run == 1:
            site.routes["/l"] = (
                200,
                '<html><body><a class="p" href="/p/1">Widget</a></body></html>',
                {},
            )
            site.routes["/p/1"] = (200, "<html><body><h1>Widget</h1></body></html>", {})
        if run == 3:  # deleted: its page answers 404, the listing drops it
            site.routes["/l"] = (200, "<html><body>empty</body></html>", {})
            site.routes["/p/1"] = (404, "nf", {})
        done = await run_crawl(
            checks(tmp_path, clock), spider_class=ListedAndOwn, home=site.url("/l"),
            product=product,
        )  # fmt: skip
        delivered += [(item["change"], item["url"]) for item in done.items if run >= 3]
    assert delivered == [("gone", site.url("/p/1"))]


class Polling(scrapy.Spider):
    """A callback that asks the page it is on again until it is ready (a project
    without a duplicate filter: Scrapy sends it, no ``dont_filter`` needed)."""

    name = "polling"

    def __init__(self, job: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [job]

    def parse(self, response: Any) -> Any:
        status = response.css("h1::text").get()
        yield {"url": response.url, "status": status}
        if status != "done":
            yield scrapy.Request(response.url)


@pytest_twisted.ensureDeferred
async def test_without_a_duplicate_filter_a_page_asked_again_is_sent(
    tmp_path: Path, clock: Clock, site: Site
) -> None:
    """The add-on's "fetched just now" stands for Scrapy's duplicate filter: without
    one (``BaseDupeFilter``), Scrapy sends the same request again, and so must we."""
    site.routes["/job"] = (200, "<html><body><h1>pending</h1></body></html>", {})
    settings = checks(tmp_path, clock)
    settings["DUPEFILTER_CLASS"] = "scrapy.dupefilters.BaseDupeFilter"

    def answer() -> None:
        site.routes["/job"] = (200, "<html><body><h1>done</h1></body></html>", {})

    from twisted.internet import reactor

    reactor.callLater(0.5, answer)  # ready half a second into the crawl
    settings["DOWNLOAD_DELAY"] = 0.2
    await run_crawl(settings, spider_class=Polling, job=site.url("/job"))
    assert site.asked.count("/job") >= 2
