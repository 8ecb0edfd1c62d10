"""The add-on's check of the pages its crawls no longer reach (``pages/unreached.py``),
through Scrapy against a loopback API that answers 404 to a request without its
key (as GitHub's does): the check asks as the crawl asked (the page's kept request,
its headers), its answer is the URL asked's (a 301 within the site: moved, its items
delivered ``gone`` once), every checked row goes behind the unchecked ones (a 403
row does not starve a later deletion), and a deleted page is gone within days, not
after its own schedule."""

from __future__ import annotations

import json
import sqlite3
import threading
import zlib
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import pytest_twisted
import scrapy

from increcrawl_scrapy.pages import unreached
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.crawling import run_crawl
from tests.crawls.test_gone_pages_edges import add_on
from tests.crawls.test_postgres_reactor import StatementThreads

pytestmark = pytest.mark.e2e

DAY = 86_400.0
TOKEN = "Bearer s3cret"


class Api:
    """A loopback API of items: ``/items`` lists them, ``/item/<n>`` is one. Without
    the crawl's ``Authorization`` every path answers 404 (private resources are not
    revealed). *listed*: the items the listing links; *deleted* answer 404, *moved*
    301 to their target, *forbidden* 403; *related*: item -> items its page links."""

    def __init__(self, items: int, key_required: bool = True) -> None:
        self.key_required = key_required
        self.listed = set(range(1, items + 1))
        self.deleted: set[int] = set()
        self.forbidden: set[int] = set()
        self.failing: set[int] = set()  # answer 500
        self.edited: set[int] = set()
        self.disallowed: set[int] = set()  # by robots.txt
        self.moved: dict[int, int] = {}
        self.related: dict[int, list[int]] = {}
        self.asked: Counter[str] = Counter()  # path -> requests with the key
        self.bare: Counter[str] = Counter()  # path -> requests without it
        self.not_modified: Counter[str] = Counter()  # path -> 304s
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                api.answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Api:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        if path == "/robots.txt":
            rules = "".join(f"Disallow: /item/{n}\n" for n in sorted(self.disallowed))
            return self._send_text(handler, f"User-agent: *\n{rules}")
        if self.key_required and handler.headers.get("Authorization") != TOKEN:
            self.bare[path] += 1
            return self._send(handler, 404, "<h1>Not Found</h1>")
        self.asked[path] += 1
        if path == "/items":
            links = "".join(f'<a href="/item/{n}">{n}</a>' for n in sorted(self.listed))
            return self._send(handler, 200, f"<h1>Items</h1>{links}")
        number = int(path.rsplit("/", 1)[-1]) if path.startswith("/item/") else 0
        if not number or number in self.deleted:
            return self._send(handler, 404, "<h1>Not Found</h1>")
        if number in self.forbidden:
            return self._send(handler, 403, "<h1>Forbidden</h1>")
        if number in self.failing:
            return self._send(handler, 500, "<h1>Internal Server Error</h1>")
        if number in self.moved:
            target = f"/item/{self.moved[number]}"
            return self._send(handler, 301, "", location=target)
        links = "".join(f'<a href="/item/{n}">{n}</a>' for n in self.related.get(number, []))
        title = f"Item {number}" + (" (edited)" if number in self.edited else "")
        etag = f'"{title}-{len(links)}"'  # an item's page carries its validator
        if handler.headers.get("If-None-Match") == etag:
            self.not_modified[path] += 1
            return self._send(handler, 304, "", etag=etag)
        self._send(handler, 200, f"<h1>{title}</h1>{links}", etag=etag)

    @staticmethod
    def _send_text(handler: BaseHTTPRequestHandler, text: str) -> None:
        data = text.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler,
        status: int,
        body: str,
        location: str | None = None,
        etag: str | None = None,
    ) -> None:
        data = f"<html><body>{body}</body></html>".encode() if status != 304 else b""
        handler.send_response(status)
        if etag:
            handler.send_header("ETag", etag)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(data)))
        if location:
            handler.send_header("Location", location)
        handler.end_headers()
        handler.wfile.write(data)

    def item(self, number: int) -> str:
        return f"{self.url}/item/{number}"


class ApiSpider(scrapy.Spider):
    """A project's spider of the API: every request carries its key; an item a page,
    the links of an item's page followed too."""

    name = "api"

    def __init__(self, api: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.api = api

    async def start(self) -> Any:
        yield scrapy.Request(f"{self.api}/items", headers={"Authorization": TOKEN})

    def parse(self, response: Any) -> Any:
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.item, headers={"Authorization": TOKEN})

    def item(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.item, headers={"Authorization": TOKEN})


@pytest.fixture
def settings(tmp_path: Any, clock: Clock) -> dict[str, Any]:
    return add_on(str(tmp_path / "state.sqlite"), clock, LOG_LEVEL="INFO")


@pytest.fixture
def api() -> Iterator[Api]:
    with Api(items=6) as served:
        yield served


def gone_items(result: Any) -> set[str]:
    return {item["url"] for item in result.items if item.get("change") == "gone"}


@pytest_twisted.ensureDeferred
async def test_a_page_that_leaves_its_listing_is_asked_with_the_crawls_key_not_gone(
    api: Api, settings: dict[str, Any], clock: Clock
) -> None:
    first = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    assert len(first.changes("new")) == 6
    # Item 2 leaves the listing, alive: no link leads to it any more.
    api.listed.discard(2)
    checked = 0
    for _ in range(6):
        clock.advance(DAY)
        done = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
        assert gone_items(done) == set(), done.log[-40:]
        checked += done.stats.get("increcrawl/unreached/checked", 0)
    assert checked >= 1
    # The check carried the crawl's key: never asked bare.
    assert api.bare["/item/2"] == 0
    assert api.asked["/item/2"] >= 2

    # Deleted now: its 404, to the request as the crawl made it, makes it gone.
    api.deleted.add(2)
    found: set[str] = set()
    for _ in range(6):
        clock.advance(DAY)
        found |= gone_items(await run_crawl(settings, spider_class=ApiSpider, api=api.url))
    assert found == {api.item(2)}


@pytest.mark.parametrize("blocked", ["forbidden", "failing", "disallowed"])
@pytest_twisted.ensureDeferred
async def test_moved_and_blocked_rows_do_not_starve_a_later_deletion(
    settings: dict[str, Any], clock: Clock, monkeypatch: pytest.MonkeyPatch, blocked: str
) -> None:
    """A row that moved, and one whose check tells nothing (403, a 500 on every
    try, robots.txt's refusal): a deletion after them is still checked."""
    monkeypatch.setattr(unreached, "MAX_CHECKS", 2)  # the cap (1,000), small
    with Api(items=6, key_required=False) as api:  # a bare request is answered too
        await moved_and_blocked(api, settings, clock, blocked)
        blocked_row_behind(settings["INCRECRAWL_DB"], api.item(4))


@pytest_twisted.ensureDeferred
async def test_on_a_shared_state_the_checks_send_no_statement_from_the_reactor(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on PostgreSQL, the API's key required: rows and memories read off
    the reactor's thread."""
    threads = StatementThreads(monkeypatch)
    monkeypatch.setattr(unreached, "MAX_CHECKS", 2)
    settings = add_on(postgres_dsn, clock, LOG_LEVEL="INFO", INCRECRAWL_FLUSH_ITEMS=3)
    with Api(items=6) as api:
        await moved_and_blocked(api, settings, clock, "forbidden")
        threads.watching = False
        blocked_row_behind(postgres_dsn, api.item(4))
    assert threads.on_reactor == []
    assert api.bare == Counter()


def blocked_row_behind(db: str, url: str) -> None:
    """The blocked row: its failed checks recorded (behind the rows never checked)."""
    with StateStore(db) as store:
        page = store.get(url)
    assert page is not None and not page.gone and page.error_streak >= 2


async def moved_and_blocked(api: Api, settings: dict[str, Any], clock: Clock, blocked: str) -> None:
    settings.update(ROBOTSTXT_OBEY=True, RETRY_TIMES=1)
    await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    # Item 3 moves within the site (a slug change: 301 to item 7, the listing links
    # item 7); item 4 leaves the listing and is *blocked*.
    api.moved[3] = 7
    api.listed = (api.listed - {3, 4}) | {7}
    getattr(api, blocked).add(4)
    moved: list[str] = []
    for _ in range(4):
        clock.advance(DAY)
        done = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
        moved += [item["url"] for item in done.items if item.get("change") == "gone"]
    # Two deletions later: each is still checked, and gone.
    api.deleted |= {5, 6}
    api.listed -= {5, 6}
    found: set[str] = set()
    for _ in range(7):
        clock.advance(DAY)
        found |= gone_items(await run_crawl(settings, spider_class=ApiSpider, api=api.url))
    assert found == {api.item(5), api.item(6)}
    # The moved URL's items were delivered gone once; it is not asked again.
    assert moved == [api.item(3)]
    assert api.asked["/item/3"] == 2  # the first crawl's fetch, its check


@pytest_twisted.ensureDeferred
async def test_a_deleted_page_with_a_long_interval_is_gone_within_a_week(
    api: Api, settings: dict[str, Any], clock: Clock
) -> None:
    # Pages checked every 20 days; item 1's page links item 5 (a "related" link).
    settings["INCRECRAWL_DEFAULT_INTERVAL"] = 20 * DAY
    api.related[1] = [5]
    await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    # Item 5 is deleted and leaves the listing the next day. The listing (a page of
    # links only, pages/listings.py) and item 1's page, not due, are skipped: their
    # links are made again from their memories (replays). For 5 days from their
    # fetch those links reach the items (they listed them that recently); the
    # listing is read again at 5 days, and after that nothing shows item 5.
    api.deleted.add(5)
    api.listed.discard(5)
    days, recent, replayed_only, said = None, [], [], []
    for day in range(1, 8):
        clock.advance(DAY)
        done = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
        if gone_items(done):
            assert gone_items(done) == {api.item(5)}
            days = day
            break
        recent.append(done.stats.get("increcrawl/unreached/replayed_recent"))
        replayed_only.append(done.stats.get("increcrawl/unreached/replayed_only"))
        said.append("1 not reached by this run" in "\n".join(done.log))
    # Checked directly the first run item 1's memory is older than 5 days: gone.
    assert days == 6
    # The six items by the listing's replays, then item 5 by item 1's only.
    assert recent == [6, 6, 6, 6, 1]
    assert replayed_only == [None] * 5 and said == [False] * 5


@pytest_twisted.ensureDeferred
async def test_a_link_of_a_page_that_answered_304_reaches_its_page(
    api: Api, settings: dict[str, Any], clock: Clock
) -> None:
    """A page unchanged (304) still links what it linked: a page skipped for its
    replayed link is reached."""
    settings["INCRECRAWL_DEFAULT_INTERVAL"] = 20 * DAY
    api.related[1] = [5]
    await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    # Twenty days later, every page due: item 1 changed (checked again sooner), the
    # others did not (later); item 5 leaves the listing.
    clock.advance(20 * DAY + 3600)
    api.edited.add(1)
    await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    api.listed.discard(5)
    # Item 1 is due again and answers 304; item 5 is not due: skipped for item 1's
    # link, made again from its memory, of a page unchanged: reached.
    clock.advance(10 * DAY + 3600)
    done = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    assert api.not_modified["/item/1"] == 1
    assert done.stats.get("increcrawl/skipped/not_due") == 5  # 2 to 6
    assert done.stats.get("increcrawl/unreached/replayed_only", 0) == 0
    assert "not reached by this run" not in "\n".join(done.log)


def _forget_kept_requests(db: str) -> None:
    """The state as a version that kept no request left it (memories without one)."""
    with sqlite3.connect(db) as connection:
        for key, body in connection.execute("SELECT normalized_url, body FROM memories"):
            memory = json.loads(zlib.decompress(body))
            memory.pop("request", None)
            blob = zlib.compress(json.dumps(memory).encode())
            connection.execute("UPDATE memories SET body = ? WHERE normalized_url = ?", (blob, key))


@pytest_twisted.ensureDeferred
async def test_a_row_without_a_kept_request_is_never_made_gone_by_a_bare_404(
    api: Api, settings: dict[str, Any], clock: Clock
) -> None:
    await run_crawl(settings, spider_class=ApiSpider, api=api.url)
    _forget_kept_requests(settings["INCRECRAWL_DB"])
    # Item 2 leaves the listing, alive: asked bare (no kept request), the API
    # answers 404. That is no proof: never gone.
    api.listed.discard(2)
    for _ in range(7):
        clock.advance(DAY)
        done = await run_crawl(settings, spider_class=ApiSpider, api=api.url)
        assert gone_items(done) == set()
    assert api.bare["/item/2"] >= 1
