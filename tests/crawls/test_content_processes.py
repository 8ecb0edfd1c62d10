"""Pages' texts taken in worker processes (``INCRECRAWL_CONTENT_PROCESSES``): the same
texts and fingerprints as on the content thread, and a worker that dies costing
nothing but the pages it held twice (site failures that back off), never the crawl."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor

from increcrawl_scrapy import stats
from increcrawl_scrapy.crawl import content_processes
from increcrawl_scrapy.crawl.content_processes import ContentProcesses
from increcrawl_scrapy.crawl.pipe_pool import PipePool
from increcrawl_scrapy.spiders.page_content import BACKLOG
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl


@pytest.fixture
def from_the_first_page(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Workers from the first page on (not after START_AFTER), pages queued on a pool
    as it starts (not taken on the thread until it is ready); the pools started."""
    monkeypatch.setattr(content_processes, "START_AFTER", 0)
    monkeypatch.setattr(PipePool, "ready", property(lambda pool: not pool.broken))
    pools: list[Any] = []
    started = ContentProcesses._started

    def recorded(self: ContentProcesses) -> Any:
        pool = started(self)
        if pool not in pools:
            pools.append(pool)
        return pool

    monkeypatch.setattr(ContentProcesses, "_started", recorded)
    return pools


@pytest_twisted.ensureDeferred
async def test_the_workers_take_the_same_texts_and_fingerprints_as_the_thread(
    tmp_path: Path, clock: Clock, from_the_first_page: list[Any]
) -> None:
    results, taken = {}, {}
    with SampleSite(pages=12) as site:
        for workers in (0, 1):
            db = str(tmp_path / f"state{workers}.sqlite")
            settings = crawl_settings(db, clock, INCRECRAWL_CONTENT_PROCESSES=workers)
            done = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert done.reason == "finished"
            taken[workers] = done.stats.get(stats.CONTENT_IN_WORKERS)
            with StateStore(db) as store:
                # The site's volatile parts (a time, a token) differ; their fingerprints not.
                results[workers] = {
                    item["url"]: store.get(item["url"]).content_hash for item in done.items
                }
    assert len(from_the_first_page) == 1  # the thread's crawl started none
    assert len(results[1]) == 12 and results[1] == results[0]
    assert taken == {0: None, 1: 12}  # every page the worker's


@pytest_twisted.ensureDeferred
async def test_pages_are_taken_on_the_thread_while_the_worker_starts(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's start (its imports: about a second, more on a busy machine) is not
    waited for: the thread takes the pages until the worker says it is ready. Here it
    never is during the crawl (its imports wait for a file made 60 s later, a bound
    on a crawl that waits for it): every page is the thread's, the crawl complete."""
    gate = tmp_path / "gate"
    monkeypatch.setenv("INCRECRAWL_TEST_WORKER_GATE", str(gate))
    monkeypatch.setattr(content_processes, "START_AFTER", 0)
    monkeypatch.setattr(
        content_processes, "_IMPORTS", (*content_processes._IMPORTS, "tests.support.slow_start")
    )
    shipped: list[Any] = []
    submit = PipePool.submit
    monkeypatch.setattr(PipePool, "submit", lambda pool, *a: shipped.append(a) or submit(pool, *a))
    opened = reactor.callLater(60, gate.touch)
    try:
        db = str(tmp_path / "state.sqlite")
        with SampleSite(pages=12) as site:
            settings = crawl_settings(db, clock, INCRECRAWL_CONTENT_PROCESSES=1)
            done = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert done.reason == "finished" and len(done.changes("new")) == 12
        assert not shipped and opened.active()
    finally:
        if opened.active():
            opened.cancel()
        gate.touch()  # its worker ends (its stdin closed with the crawl)


@pytest_twisted.ensureDeferred
async def test_a_killed_worker_costs_only_the_pages_it_held_twice(
    tmp_path: Path, clock: Clock, from_the_first_page: list[Any]
) -> None:
    """Its pool killed mid-crawl (an out-of-memory kill, say) with pages in hand: they
    are asked of a new pool; that one killed too, the pages it held a second time are
    site failures that report nothing; the crawl completes, and the next run past the
    back-off records them."""
    killed: list[Any] = []
    started = ContentProcesses._started

    def kill_two_pools(self: ContentProcesses) -> Any:
        pool = started(self)
        if len(killed) < 2 and pool not in killed and self._pages >= 5:
            killed.append(pool)  # killed once it answered a page, more in hand
            _kill_once_answered(pool)
        return pool

    ContentProcesses._started = kill_two_pools  # type: ignore[method-assign]
    try:
        db = str(tmp_path / "state.sqlite")
        with SampleSite(pages=40) as site:
            # Every page held twice fails: more than the error ratio a run ends on.
            settings = crawl_settings(
                db, clock, INCRECRAWL_CONTENT_PROCESSES=1, INCRECRAWL_MAX_ERROR_RATIO=1.0
            )
            first = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert len(killed) == 2 and first.reason == "finished"
            with StateStore(db) as store:
                unread = [url for url in site.page_urls() if store.get(url).content_hash is None]
            lost = first.stats.get(stats.CONTENT_WORKER_LOST, 0)
            assert unread and len(unread) == lost and first.stats.get(stats.BACKED_OFF) == lost
            assert first.changes("new") >= set(site.page_urls()) - set(unread)
            assert not first.changes("new") & set(unread)
            clock.advance(2 * 86_400)
            again = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert set(unread) <= again.changes("new")
            with StateStore(db) as store:
                assert all(store.get(url).content_hash for url in site.page_urls())
    finally:
        ContentProcesses._started = started  # type: ignore[method-assign]


def _kill_once_answered(pool: Any) -> None:
    """Kill *pool* as its first answer comes, while it holds more: killed at a fixed
    delay, a pool still starting on a busy machine had answered no page (every page
    lost twice: the run ended ``too_many_errors``); polled, a fast worker had answered
    them all."""
    futures: list[Any] = []
    submit = pool.submit

    def answered(_future: Any) -> None:
        if pool in killed_pools:
            return
        if any(not future.done() for future in futures):
            killed_pools.append(pool)
            _kill(pool)

    killed_pools: list[Any] = []

    def recorded(*args: Any, **kwargs: Any) -> Any:
        futures.append(submit(*args, **kwargs))
        futures[-1].add_done_callback(answered)
        return futures[-1]

    pool.submit = recorded


def _kill(pool: Any) -> None:
    for pid in list(pool._processes):  # the pool's workers (no public way)
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(
    ("body", "headers", "given"),
    [
        (
            '<meta charset="latin-1"><main><h1>Café crème</h1>naïve</main>'.encode("latin-1"),
            {},
            None,
        ),
        ("\ufeff<main>✓ checked</main>".encode(), {"Content-Type": "text/html"}, None),
        ("<main>Zürich, Genève</main>".encode(), {}, "latin-1"),
        (b"plain text", {"Content-Type": "text/plain; charset=utf-8"}, None),
    ],
)
def test_a_shipped_page_is_decoded_as_scrapy_decodes_it(
    body: bytes, headers: dict[str, str], given: str | None
) -> None:
    """What a worker makes of a page is what the thread makes of the response: the
    encoding said in a meta, a BOM, one the response was made with (here not the
    body's: its text is what that encoding reads)."""
    from scrapy.http import HtmlResponse, TextResponse

    from increcrawl_scrapy.content.page_text import ContentOptions
    from increcrawl_scrapy.crawl.response_text import response_text, with_print

    kind = TextResponse if "plain" in headers.get("Content-Type", "") else HtmlResponse
    extra = {"encoding": given} if given else {}
    response = kind("https://example.org/p", body=body, headers=headers, **extra)
    options = ContentOptions()
    page = content_processes.shipped(response)
    assert content_processes.shipped_text(True, page, options) == with_print(
        True, response_text, response, options
    )


def _write_pages(root: Path, base: str, pages: int, container: str, paragraphs: int = 4) -> str:
    """*pages* pages whose content sits in *container* (``main``: marked; ``div``: a
    div of no known name, extracted by trafilatura), of *paragraphs* paragraphs of 40
    words; the sitemap's URL."""
    words = ["the", "crawler", "keeps", "each", "page", "with", "its", "own", "state", "again"]
    (root / "p").mkdir()
    for i in range(pages):
        text = "".join(
            "<p>" + " ".join(words[(i + j + k) % len(words)] for k in range(40)) + "</p>"
            for j in range(paragraphs)
        )
        body = f"<h1>Page {i}</h1>{text}"
        content = f"<main>{body}</main>" if container == "main" else f'<div class="c7">{body}</div>'
        (root / "p" / f"{i}.html").write_text(
            f"<!doctype html><html><head><title>Page {i}</title></head><body>"
            f"<header><nav><a href='/'>Home</a></nav></header>{content}"
            "<footer>(c) 2026</footer></body></html>"
        )
    urls = "".join(f"<url><loc>{base}/p/{i}.html</loc></url>" for i in range(pages))
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )
    return f"{base}/sitemap.xml"


@pytest.mark.parametrize(
    ("container", "cores", "chosen"),
    [("div", 2, 1), ("main", 2, 1), ("div", 1, 0)],
)
@pytest_twisted.ensureDeferred
async def test_auto_takes_a_worker_where_a_second_core_is_there(
    tmp_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    from_the_first_page: list[Any],
    container: str,
    cores: int,
    chosen: int,
) -> None:
    """``auto``: after the first pages on the thread, one worker where the process
    may use two cores, whether pages mark their ``<main>`` or are extracted
    (trafilatura); with one core, the thread. The same fingerprints either way.
    More pages than the first and the backlog (the pages in hand at most): later
    ones come after the decision."""
    from tests.support.nginx import nginx

    monkeypatch.setattr(content_processes, "START_AFTER", 8)
    monkeypatch.setattr(content_processes, "available_cores", lambda: cores)
    pools = from_the_first_page
    pages = 8 + BACKLOG + 8
    www = tmp_path / "www"
    www.mkdir()
    prints = {}
    with nginx(www, tmp_path / "nginx") as (url, _access):
        sitemap = _write_pages(www, url, pages, container)
        for mode in ("auto", 0):
            db = str(tmp_path / f"{mode}.sqlite")
            settings = crawl_settings(db, clock, INCRECRAWL_CONTENT_PROCESSES=mode)
            done = await run_crawl(settings, sitemap_url=sitemap)
            assert done.reason == "finished" and len(done.changes("new")) == pages
            with StateStore(db) as store:
                prints[mode] = {u: store.get(u).content_hash for u in done.changes("new")}
            if mode == "auto":
                assert done.stats.get(stats.CONTENT_PROCESSES) == chosen
                assert len(pools) == chosen
                how = "extracted" if container == "div" else "main"
                assert done.stats.get(stats.CONTENT_FOUND.format(how=how)) == pages
    assert prints["auto"] == prints[0] and all(prints[0].values())


def test_auto_chooses_the_thread_without_the_asyncio_reactor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers are fed by asyncio's loop: under another reactor ``auto`` says the
    thread (it said a worker, and the stat 1, where none could run)."""
    from increcrawl_scrapy import compat

    monkeypatch.setattr(content_processes, "available_cores", lambda: 2)
    monkeypatch.setattr(compat, "asyncio_available", lambda: False)
    processes = ContentProcesses(None)
    processes._taken = content_processes.START_AFTER
    assert processes._chosen() == 0


@pytest_twisted.ensureDeferred
async def test_auto_decides_though_every_page_came_before_the_first_texts_were_taken(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``auto`` decides as the first pages' texts are taken. Decided when a later page
    came, a crawl whose pages had all come by then (fetched faster than their texts
    are taken, up to the backlog) never decided: no choice logged, no stat."""
    from tests.support.nginx import nginx

    monkeypatch.setattr(content_processes, "START_AFTER", 8)
    monkeypatch.setattr(content_processes, "available_cores", lambda: 2)
    www = tmp_path / "www"
    www.mkdir()
    with nginx(www, tmp_path / "nginx") as (url, _access):
        sitemap = _write_pages(www, url, BACKLOG - 2, "div")
        settings = crawl_settings(
            str(tmp_path / "state.sqlite"), clock, INCRECRAWL_CONTENT_PROCESSES="auto"
        )
        done = await run_crawl(settings, sitemap_url=sitemap)
    assert done.reason == "finished" and len(done.changes("new")) == BACKLOG - 2
    assert done.stats.get(stats.CONTENT_PROCESSES) == 1
    assert any("in a worker process after the first 8 pages" in line for line in done.log)


@pytest_twisted.ensureDeferred
async def test_a_page_queued_on_a_pool_shut_down_under_it_is_asked_of_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pool broken by another page is shut down with its queued pages cancelled: a
    page still queued there is asked of the next pool, never lost (lost, its crawl
    waited for it for ever: a test killing workers under load hung at 39 of 40)."""
    import asyncio
    from concurrent.futures import Future

    from scrapy.http import HtmlResponse
    from twisted.internet import task
    from twisted.internet.defer import Deferred

    from increcrawl_scrapy import compat
    from increcrawl_scrapy.content.page_text import ContentOptions

    class Pool:
        ready, broken, failed_start = True, False, False

        def __init__(self, answer: Any) -> None:
            self.answer, self.futures = answer, []

        def submit(self, *_args: Any) -> Future:
            future: Future = Future()
            if self.answer is not None:
                future.set_result(self.answer)
            self.futures.append(future)
            return future

        def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
            for future in self.futures:
                future.cancel()  # queued, not running: what ProcessPoolExecutor does

    first, second = Pool(None), Pool(("text", "print"))
    pools = iter([first, second])
    processes = ContentProcesses(1)
    monkeypatch.setattr(content_processes, "START_AFTER", 0)
    monkeypatch.setattr(compat, "asyncio_available", lambda: True)

    def started(self: ContentProcesses) -> Any:
        if self._pool is None:
            self._pool = next(pools)
        return self._pool

    monkeypatch.setattr(ContentProcesses, "_started", started)
    response = HtmlResponse("https://example.org/p", body=b"<main>x</main>")

    page = asyncio.ensure_future(processes.text_of(True, response, ContentOptions()))
    await task.deferLater(reactor, 0.05)  # queued on the first pool
    assert first.futures and not page.done()
    processes._broken(first)  # another page found it broken
    assert await Deferred.fromFuture(page) == ("text", "print")


@pytest_twisted.ensureDeferred
async def test_a_geonode_answer_of_no_text_is_read_in_a_worker_as_on_the_thread(
    tmp_path: Path, clock: Clock, from_the_first_page: list[Any]
) -> None:
    """A page with nothing to convert (an empty file): Geonode answers an empty
    markdown. Flagged ``geonode``, the empty body is the page's text, not an origin
    that sent nothing (a site failure that backs off): in a worker as on the thread,
    which reads the response's flags (the worker was given none)."""
    from tests.crawling import KEY
    from tests.support.nginx import nginx

    www = tmp_path / "www"
    www.mkdir()
    results = {}
    with nginx(www, tmp_path / "nginx") as (url, _access), GeonodeStandIn(api_keys=[KEY]) as api:
        sitemap = _write_pages(www, url, 6, "main")
        (www / "p" / "5.html").write_text("")
        for workers in (0, 1):
            db = str(tmp_path / f"state{workers}.sqlite")
            settings = crawl_settings(
                db, clock, api, GEONODE_FORMATS=["markdown"], INCRECRAWL_CONTENT_PROCESSES=workers
            )
            done = await run_crawl(settings, sitemap_url=sitemap)
            assert done.reason == "finished"
            with StateStore(db) as store:
                results[workers] = {
                    u: store.get(u).content_hash for u in (f"{url}/p/{i}.html" for i in range(6))
                }
    assert len(from_the_first_page) == 1  # the thread's crawl started none
    assert results[1] == results[0] and all(results[0].values())
