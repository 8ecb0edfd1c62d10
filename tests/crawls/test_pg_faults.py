"""A shared PostgreSQL state under faults of a real server: connections dropped
(``pg_terminate_backend``), the server restarted, a statement timeout, another
client's transaction holding row locks, a worker SIGKILLed inside a write, workers'
clocks 10 minutes apart. Buffered results survive and are written once the server
answers again; claims go on; nothing is written twice or half."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_twisted
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler

from increcrawl_scrapy.spiders.cluster_share import ClusterShare
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.state.claims import ServerAway
from tests.conftest import Clock

SEED = "https://example.com/sitemap.xml"
URLS = [f"https://example.com/p{i}" for i in range(10)]


def _record_all(store: StateStore) -> None:
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")


def _terminate_others(dsn: str) -> int:
    import psycopg

    # (An administrator's connection: no statement timeout the database may set.)
    with psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=0") as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_results_survive_dropped_connections(postgres_dsn: str, clock: Clock) -> None:
    with StateStore(postgres_dsn, clock=clock, flush_items=1000) as store:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        _record_all(store)  # ten results buffered, their rows leased
        # The store's two connections (at least: on a busy machine a backend ended
        # just before may still be listed while it exits).
        assert _terminate_others(postgres_dsn) >= 2
        assert store.flush() == 10
        assert store.count(last_status=200) == 10
        clock.advance(2 * 86_400)
        assert _terminate_others(postgres_dsn) >= 2
        assert len(store.due(SEED)) == 10  # claims go on
    with StateStore(postgres_dsn, clock=clock) as reopened:
        assert reopened.count(last_status=200) == 10


@pytest.fixture
def own_server():
    """A server of the test's own (it is restarted)."""
    from tests.support.postgres import ThrowawayPostgres

    with ThrowawayPostgres() as server:
        yield server


def test_results_survive_a_server_restart(own_server, clock: Clock) -> None:
    dsn = own_server.create_database("restarted")
    store = StateStore(dsn, clock=clock, flush_items=1000)
    try:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        _record_all(store)
        own_server.restart()
        assert store.flush() == 10
    finally:
        store.close()
    with StateStore(dsn, clock=clock) as reopened:
        assert reopened.count(last_status=200) == 10
        assert reopened.due(SEED) == []


def test_a_claim_while_the_server_restarts_is_asked_again_later(
    own_server, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    # No thread waits for a restarting server: the claim says "ask again" at once (an
    # empty chunk; the crawl waits on the reactor), holding no lock (the heartbeat
    # and the release of leases take it too), and gives up after the outage's bound.
    # (Claims run on worker threads: on the reactor's, an outage is raised at once.)
    dsn = own_server.create_database("waiting")
    with StateStore(dsn, clock=clock) as store, ThreadPoolExecutor(1) as worker:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        claims = store.results.claims
        chunks = store.due_chunks(SEED, wait=True)

        def off_reactor(call):
            return worker.submit(call).result(timeout=120)

        own_server.halt()
        try:
            assert off_reactor(lambda: next(chunks)) == []
            assert off_reactor(lambda: next(chunks)) == []
            assert caplog.text.count("cannot be reached") == 1  # said once an outage
            assert claims.lock.acquire(timeout=0)
            claims.lock.release()
            with pytest.raises(ServerAway):
                off_reactor(lambda: store.due(SEED))  # a caller that does not wait is told
            claims.outage_seconds = 0  # the outage outlasts its bound: the error itself
            with pytest.raises(Exception) as raised:
                off_reactor(lambda: next(chunks))
            assert not isinstance(raised.value, ServerAway)
        finally:
            own_server.resume()
        claimed = off_reactor(lambda: next(store.due_chunks(SEED, wait=True)))
        assert len(claimed) == len(URLS)


@pytest_twisted.ensureDeferred
async def test_the_crawls_last_write_waits_out_a_restarting_server(
    own_server, clock: Clock
) -> None:
    dsn = own_server.create_database("last_write")
    store = StateStore(dsn, clock=clock, flush_items=1000)
    try:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        _record_all(store)  # ten results buffered
        own_server.halt()
        threading.Timer(3.0, own_server.resume).start()
        assert await deferred_from_coro(store.write_last()) == 10
    finally:
        store.close()
    with StateStore(dsn, clock=clock) as reopened:
        assert reopened.count(last_status=200) == 10


@pytest_twisted.ensureDeferred
async def test_a_heartbeat_the_server_misses_leaves_the_loop_beating(
    own_server, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    # A beat while the server restarts raised, and Twisted's LoopingCall stops for
    # good on a failed call: the leases of pages in flight were never renewed again
    # and another worker took them over (a review of the claims' lock change).
    caplog.set_level(logging.INFO)
    dsn = own_server.create_database("beating")
    with StateStore(dsn, clock=clock) as store:
        crawler = get_crawler()
        crawler.engine = SimpleNamespace(downloader=SimpleNamespace(slots={}))  # started
        share = ClusterShare(crawler, store, SEED, None)  # beaten as its loop beats
        await deferred_from_coro(share.beat())
        own_server.halt()
        try:
            await deferred_from_coro(share.beat())
        finally:
            own_server.resume()
        assert "heartbeat could not reach the state" in caplog.text
        await deferred_from_coro(share.beat())
        assert "reached the state again after 1 missed" in caplog.text
        assert share.crawls == (1, 1)


def test_discovery_and_result_writes_never_deadlock(postgres_dsn: str, clock: Clock) -> None:
    # A results batch locks its rows in key order (leases.fence); discovery's chunk,
    # listed in another order, locks them in key order too: one waits for the other,
    # neither is aborted. And a row another worker inserted meanwhile (a result of a
    # URL not yet discovered) does not abort the chunk.
    import threading

    import psycopg

    first, second = "https://example.com/a", "https://example.com/b"
    with StateStore(postgres_dsn, clock=clock) as store:
        store.start_run(SEED).upsert([(first, None), (second, None)])
        run = store.start_run(SEED)
        writer = psycopg.connect(postgres_dsn, autocommit=True)
        errors: list[BaseException] = []
        try:
            with writer.transaction():
                writer.execute(  # as a fence locks: the first key first...
                    "SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE", (first,)
                )

                def discover() -> None:
                    try:  # ...while discovery lists the second before the first
                        run.upsert([(second, None), (first, None), ("https://example.com/c", None)])
                    except BaseException as exc:  # reported below
                        errors.append(exc)

                thread = threading.Thread(target=discover)
                thread.start()
                time.sleep(0.5)  # discovery is waiting on the first row by now
                writer.execute(
                    "SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE", (second,)
                )
                writer.execute(
                    "INSERT INTO pages (normalized_url, url, seed, first_seen, interval_s) "
                    "VALUES (%s, %s, %s, 0, 86400)",
                    ("https://example.com/c", "https://example.com/c", SEED),
                )
            thread.join(30)
        finally:
            writer.close()
        assert errors == []
        assert store.count(seed=SEED) == 3


def test_a_transaction_holding_row_locks_delays_results_and_loses_none(
    postgres_dsn: str, clock: Clock
) -> None:
    # Another client holds a row's lock in a transaction left open: a claim skips the
    # row, a write waits INCRECRAWL_DB_LOCK_TIMEOUT and fails, its results kept for
    # the next write, which goes through once the lock is gone.
    import psycopg

    with StateStore(postgres_dsn, clock=clock, flush_items=1000, lock_timeout=0.5) as store:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        blocker = psycopg.connect(postgres_dsn)  # not autocommit: a transaction stays open
        lock = "SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE"
        try:
            blocker.execute(lock, (URLS[0],))
            due = store.due(SEED)  # the locked row is skipped, not waited for
            assert len(due) == 9 and URLS[0] not in {page.url for page in due}
            blocker.rollback()
            blocker.execute(lock, (due[0].normalized_url,))  # a row of the next batch
            for page in due:
                store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                store.flush()
        finally:
            blocker.rollback()
            blocker.close()
        assert store.flush() == 9  # kept, and written once the lock is gone
        assert store.count(last_status=200) == 9


@pytest_twisted.ensureDeferred
async def test_a_discovery_the_database_stops_leaves_the_queue_to_fetch(
    postgres_dsn: str, tmp_path: Path, clock: Clock
) -> None:
    # Another client holds a listed row's lock longer than the lock timeout: that
    # discovery chunk fails. The run says so, counts its discovery incomplete, and
    # still fetches what is due (all but the locked row, which its claim skips).
    import psycopg

    from increcrawl_scrapy.testing import SampleSite
    from tests.crawling import crawl_settings, run_crawl

    with SampleSite(pages=12) as site:
        settings = crawl_settings(postgres_dsn, clock, INCRECRAWL_DB_LOCK_TIMEOUT=0.5)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(first.changes("new")) == 12
        clock.advance(40 * 86_400)
        site.edit(1)  # its sitemap changes: read again, its chunk meets the lock
        site.reset_counters()
        blocker = psycopg.connect(postgres_dsn)  # a transaction left open
        try:
            blocker.execute(
                "SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE", (site.page_url(1),)
            )
            second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        finally:
            blocker.rollback()
            blocker.close()
    assert second.stats.get("increcrawl/discovery_incomplete") == 1
    assert any("discovery stopped" in line.lower() for line in second.log)
    assert sum(site.fetched[f"/page/{i}"] for i in range(12)) == 11


@pytest_twisted.ensureDeferred
async def test_a_server_restart_mid_crawl_loses_no_result(own_server, clock: Clock) -> None:
    # The server restarts while a crawl fetches (every connection drops): the crawl
    # goes on, its results are written once the server is back, and it finishes.
    import threading

    from increcrawl_scrapy.testing import SampleSite
    from tests.crawling import crawl_settings, run_crawl

    dsn = own_server.create_database("crawled")
    with SampleSite(pages=40) as site:
        settings = crawl_settings(dsn, clock, INCRECRAWL_FLUSH_ITEMS=5, CONCURRENT_REQUESTS=2)
        restarted = threading.Event()

        def restart_when_fetching() -> None:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and sum(site.fetched.values()) < 10:
                time.sleep(0.01)
            own_server.restart()
            restarted.set()

        watcher = threading.Thread(target=restart_when_fetching)
        watcher.start()
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        watcher.join()
    assert restarted.is_set()
    assert result.reason == "finished"
    with StateStore(dsn, clock=clock) as store:
        assert store.count(last_status=200) == 40


def test_a_statement_timeout_delays_results_and_loses_none(postgres_dsn: str, clock: Clock) -> None:
    # The server cancels statements past 200 ms (statement_timeout, taken by the
    # connections opened again after a drop), and the write takes longer (a row it
    # writes is locked by another client): it fails and keeps its results; once the
    # timeout is lifted, they are written, once.
    import psycopg

    name = postgres_dsn.rsplit("/", 1)[1]
    with StateStore(postgres_dsn, clock=clock, flush_items=1000) as store:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        _record_all(store)
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            admin.execute(f"ALTER DATABASE {name} SET statement_timeout = '200ms'")
        _terminate_others(postgres_dsn)
        blocker = psycopg.connect(postgres_dsn, options="-c statement_timeout=0")
        try:
            blocker.execute("SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE", (URLS[0],))
            with pytest.raises(psycopg.errors.QueryCanceled):
                store.flush()
        finally:
            blocker.rollback()
            blocker.close()
            with psycopg.connect(
                postgres_dsn, autocommit=True, options="-c statement_timeout=0"
            ) as admin:
                admin.execute(f"ALTER DATABASE {name} RESET statement_timeout")
        _terminate_others(postgres_dsn)
        assert store.flush() == 10
    with StateStore(postgres_dsn, clock=clock) as reopened:
        assert reopened.count(last_status=200) == 10
        assert reopened.count(fetch_count=1) == 10


def test_a_worker_killed_inside_a_write_leaves_nothing_half_written(
    postgres_dsn: str, clock: Clock
) -> None:
    # A worker is SIGKILLed while its results' transaction is open (its write waits
    # on a row another client locked): nothing of the batch is written, its leases
    # expire, and another worker fetches and records every page once.
    import subprocess
    import sys

    import psycopg

    with StateStore(postgres_dsn, clock=clock) as store:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
    worker = (
        "import sys\n"
        "from increcrawl_scrapy.state import StateStore\n"
        "store = StateStore(sys.argv[1], flush_items=1000, lease_seconds=2, lock_timeout=60)\n"
        f"for page in store.due({SEED!r}):\n"
        f"    store.record(page.url, 200, seed={SEED!r}, key=page.normalized_url, "
        "content_hash='doomed')\n"
        "print('recorded', flush=True)\n"
        "sys.stdin.readline()  # once the test holds a row's lock\n"
        "store.flush()\n"
    )
    blocker = psycopg.connect(postgres_dsn)  # a transaction left open
    process = subprocess.Popen(
        [sys.executable, "-c", worker, postgres_dsn],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "recorded"
        blocker.execute("SELECT 1 FROM pages WHERE normalized_url = %s FOR UPDATE", (URLS[-1],))
        assert process.stdin is not None
        process.stdin.write("write\n")
        process.stdin.flush()
        with psycopg.connect(postgres_dsn, autocommit=True) as watcher:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:  # the write is waiting inside its transaction
                (waiting,) = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                    "AND datname = current_database()"
                ).fetchone()
                if waiting:
                    break
                time.sleep(0.05)
            assert waiting
        process.kill()
        assert process.wait(30) == -9
    finally:
        process.kill()
        process.communicate()  # its pipes closed
        blocker.rollback()
        blocker.close()
    time.sleep(2.5)  # the dead worker's leases (2 s, by the server's clock) expire
    with StateStore(postgres_dsn, clock=clock) as survivor:
        assert survivor.count(last_status=200) == 0  # none of the batch was written
        assert survivor.count(content_hash="doomed") == 0
        _record_all(survivor)
        assert survivor.flush() == 10
        assert survivor.count(fetch_count=1) == 10


def test_workers_ten_minutes_apart_never_claim_one_page(postgres_dsn: str) -> None:
    # One worker's clock 10 minutes ahead, the other's 10 minutes behind: their
    # claims (leases by the server's clock) never overlap, and between them they
    # record every page once.
    from tests.conftest import Clock

    ahead, behind = Clock(Clock().now + 600), Clock(Clock().now - 600)
    first = StateStore(postgres_dsn, clock=ahead, flush_items=1000)
    second = StateStore(postgres_dsn, clock=behind, flush_items=1000)
    try:
        first.start_run(SEED).upsert([(f"https://example.com/q{i}", None) for i in range(250)])
        taken = next(first.due_chunks(SEED, size=100))
        theirs = [page for chunk in second.due_chunks(SEED) for page in chunk]
        assert not {p.normalized_url for p in taken} & {p.normalized_url for p in theirs}
        assert len(taken) + len(theirs) == 250
        for store, pages in ((first, taken), (second, theirs)):
            for page in pages:
                store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
            store.flush()
        assert first.count(fetch_count=1) == 250
    finally:
        first.close()
        second.close()
