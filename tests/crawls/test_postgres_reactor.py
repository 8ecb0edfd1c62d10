"""Never blocking the reactor on a shared state: once a crawl on PostgreSQL has opened
its state, every statement it sends runs on a thread other than the reactor's
(claims, result writes, heartbeats, discovery's steps, the last flush, the run's
end), for the incremental spider and for an ordinary spider with the pipeline and
``SkipNotDueMiddleware``; and recording never waits on a write in progress."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.crawl.shared_state import CrawlState
from increcrawl_scrapy.state import StateStore, writes
from increcrawl_scrapy.state.results import Results
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


class StatementThreads:
    """The statements sent to PostgreSQL once a crawl's state is open, by thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import psycopg

        self.reactor = threading.current_thread()  # pytest-twisted runs tests on it
        self.watching = False
        self.on_reactor: list[str] = []
        self.elsewhere = 0
        for name in ("execute", "executemany"):
            original = getattr(psycopg.Cursor, name)

            def spy(cursor: Any, query: Any, *args: Any, _original: Any = original, **kw: Any):
                if self.watching:
                    if threading.current_thread() is self.reactor:
                        self.on_reactor.append(" ".join(str(query).split())[:80])
                    else:
                        self.elsewhere += 1
                return _original(cursor, query, *args, **kw)

            monkeypatch.setattr(psycopg.Cursor, name, spy)
        opening = CrawlState.__init__

        def opened(state: CrawlState, crawler: Crawler) -> None:
            self.watching = False  # opening the state (connect, the run's row) is not
            opening(state, crawler)
            self.watching = True

        monkeypatch.setattr(CrawlState, "__init__", opened)


@pytest_twisted.ensureDeferred
async def test_the_incremental_spider_sends_no_statement_from_the_reactor(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = StatementThreads(monkeypatch)
    with SampleSite(pages=30) as site:
        # Small flushes: many are written while the crawl goes on.
        settings = crawl_settings(postgres_dsn, clock, INCRECRAWL_FLUSH_ITEMS=3)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        clock.advance(40 * DAY)
        site.edit(4, text="An edit between the runs.")
        site.delete(9)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        edited, deleted, seed = site.page_url(4), site.page_url(9), site.sitemap_url
    threads.watching = False
    assert len(first.changes("new")) == 30
    assert list(second.changes("changed")) == [edited]
    assert list(second.changes("gone")) == [deleted]
    assert threads.on_reactor == []
    assert threads.elsewhere > 30  # the spy saw the crawl's statements
    with StateStore(postgres_dsn) as store:
        assert store.count(seed) == 30
        assert store.count(seed, gone=True) == 1


class PlainSpider(scrapy.Spider):
    """An ordinary spider: one item a page, with two keyed items on page 1."""

    name = "plain"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "text": " ".join(response.css("p::text").getall())}


async def crawl_plain(settings: dict[str, Any], urls: list[str]) -> dict[str, Any]:
    crawler = Crawler(PlainSpider, Settings(settings))
    items: list[dict] = []
    crawler.signals.connect(
        lambda item: items.append(dict(item)), signal=signals.item_scraped, weak=False
    )
    await crawler.crawl(urls=urls)
    assert crawler.stats is not None
    return {"items": items, **crawler.stats.get_stats()}


@pytest_twisted.ensureDeferred
async def test_an_ordinary_spider_on_a_shared_state_sends_no_statement_from_the_reactor(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads = StatementThreads(monkeypatch)
    with SampleSite(pages=12) as site:
        settings = {
            "ADDONS": {"increcrawl_scrapy.Addon": 300},
            "INCRECRAWL_DB": postgres_dsn,
            "INCRECRAWL_CLOCK": clock,
            "INCRECRAWL_SKIP_NOT_DUE": True,
            "INCRECRAWL_FLUSH_ITEMS": 3,
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
        }
        urls = site.page_urls()
        first = await crawl_plain(settings, urls)
        clock.advance(3600)  # nothing due yet
        site.reset_counters()
        second = await crawl_plain(settings, urls)
        fetched_second = sum(site.fetched.values())
        clock.advance(60 * DAY)  # all due: asked conditionally where validators exist
        site.edit(2, text="Edited.")
        site.delete(7)  # its 404: the page's row and memory read, its item gone
        third = await crawl_plain(settings, urls)
        edited, deleted = site.page_url(2), site.page_url(7)
    threads.watching = False
    assert {item["change"] for item in first["items"]} == {"new"}
    assert len(first["items"]) == 12
    assert second["items"] == [] and fetched_second == 0
    assert second.get("increcrawl/skipped/not_due") == 12
    changed = [item["url"] for item in third["items"] if item["change"] == "changed"]
    assert changed == [edited]
    assert [item["url"] for item in third["items"] if item["change"] == "gone"] == [deleted]
    assert threads.on_reactor == []
    assert threads.elsewhere > 12


# -- recording never waits on a write -------------------------------------------


@pytest.fixture
def slow_writes(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Writes that wait for the returned event (a database slow to answer)."""
    gate = threading.Event()
    real = writes.write_batch

    def slow(*args: Any, **kwargs: Any) -> None:
        assert gate.wait(300), "the test never opened the gate"
        real(*args, **kwargs)

    monkeypatch.setattr(writes, "write_batch", slow)
    return gate


def test_recording_goes_on_while_a_write_is_in_progress(
    postgres_dsn: str, clock: Clock, slow_writes: threading.Event
) -> None:
    seed = "https://site.test/sitemap.xml"
    url = "https://site.test/page/{}".format
    with StateStore(postgres_dsn, clock=clock, flush_items=2) as store:
        store.record(url(0), 200, seed=seed, content_hash="a")
        store.record(url(1), 200, seed=seed, content_hash="a")  # hands 2 to the writer
        started = time.monotonic()
        for i in range(2, 40):
            store.record(url(i), 200, seed=seed, content_hash="a")
        store.record(url(0), 200, seed=seed, content_hash="b")  # its first result in flight
        # Well short of the 300 s the writer waits for the gate: recording did not
        # wait for the write in flight (a bound on a hang, not a speed: a busy machine
        # takes seconds).
        assert time.monotonic() - started < 120
        # Results in flight are the rows as they stand.
        assert store.get(url(1)) is not None and store.get(url(1)).content_hash == "a"
        assert store.get(url(0)).content_hash == "b"
        slow_writes.set()
        assert store.count(seed) == 40  # count() flushes: after the write in flight
        assert store.get(url(0)).content_hash == "b"
    with StateStore(postgres_dsn, clock=clock) as store:
        assert store.count(seed) == 40
        assert store.get(url(0)).content_hash == "b"
        assert store.get(url(0)).fetch_count == 2


def test_a_write_that_fails_keeps_its_results_for_the_next(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch, caplog
) -> None:
    real = writes.write_batch
    failures = []

    def failing_once(*args: Any, **kwargs: Any) -> None:
        if not failures:
            failures.append(1)
            raise RuntimeError("connection lost")
        real(*args, **kwargs)

    monkeypatch.setattr(writes, "write_batch", failing_once)
    seed = "https://site.test/sitemap.xml"
    with StateStore(postgres_dsn, clock=clock, flush_items=2) as store:
        for i in range(5):
            store.record(f"https://site.test/page/{i}", 200, seed=seed, content_hash="a")
            time.sleep(0.05)  # the failed write is collected by a later record()
        store.record("https://site.test/page/0", 200, seed=seed, content_hash="b")
        assert store.count(seed) == 5
        assert store.get("https://site.test/page/0").content_hash == "b"
    assert failures and "kept and written with the next flush" in caplog.text


# -- reading rows before they are recorded -----------------------------------------


def test_callers_loading_at_once_share_one_read(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[int] = []
    real = Results._read

    def slow(results: Results, keys: list[str]) -> None:
        reads.append(len(keys))
        time.sleep(0.3)  # a database far away: the others arrive meanwhile
        real(results, keys)

    monkeypatch.setattr(Results, "_read", slow)
    urls = [f"https://site.test/page/{i}" for i in range(40)]
    with StateStore(postgres_dsn, clock=clock) as store:
        loads = [threading.Thread(target=store.load, args=([url],)) for url in urls]
        for load in loads:
            load.start()
        for load in loads:
            load.join(30)
        assert all(store.known(url) for url in urls)
        assert sum(reads) == 40 and len(reads) <= 3, reads


def test_a_row_written_while_it_was_read_is_not_kept_stale(
    postgres_dsn: str, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed, url = "https://site.test/sitemap.xml", "https://site.test/page/1"
    with StateStore(postgres_dsn, clock=clock) as store:
        store.record(url, 200, seed=seed, content_hash="old")
        store.flush()
        io = store.results.io
        real = io.tuples

        def slow(sql: str, params: Any = ()) -> list:
            rows = list(real(sql, params))  # the row as it was
            time.sleep(0.4)  # meanwhile the crawl records the page and writes it
            return rows

        monkeypatch.setattr(io, "tuples", slow)
        loading = threading.Thread(target=store.load, args=([url],))
        loading.start()
        time.sleep(0.1)
        store.record(url, 200, seed=seed, content_hash="new")
        store.flush()  # waits for the read's lock, then writes before it keeps the row
        loading.join(30)
        monkeypatch.undo()
        assert store.get(url).content_hash == "new"
        assert store.get(url).fetch_count == 2
