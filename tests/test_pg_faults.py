"""A shared PostgreSQL state under faults of a real server: connections dropped
(``pg_terminate_backend``), the server restarted. Buffered results survive and are
written once the server answers again; claims go on."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock

SEED = "https://example.com/sitemap.xml"
URLS = [f"https://example.com/p{i}" for i in range(10)]


def _record_all(store: StateStore) -> None:
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")


def _terminate_others(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_results_survive_dropped_connections(postgres_dsn: str, clock: Clock) -> None:
    with StateStore(postgres_dsn, clock=clock, flush_items=1000) as store:
        store.start_run(SEED).upsert([(u, None) for u in URLS])
        _record_all(store)  # ten results buffered, their rows leased
        assert _terminate_others(postgres_dsn) == 2  # the store's two connections
        assert store.flush() == 10
        assert store.count(last_status=200) == 10
        clock.advance(2 * 86_400)
        assert _terminate_others(postgres_dsn) == 2
        assert len(store.due(SEED)) == 10  # claims go on
    with StateStore(postgres_dsn, clock=clock) as reopened:
        assert reopened.count(last_status=200) == 10


@pytest.fixture
def own_server():
    """A server of the test's own (it is restarted)."""
    from increcrawl_scrapy.testing.postgres import ThrowawayPostgres

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


def test_discovery_and_result_writes_never_deadlock(postgres_dsn: str, clock: Clock) -> None:
    # A results batch locks its rows in key order (leases.fence); discovery's chunk,
    # listed in another order, locks them in key order too: one waits for the other,
    # neither is aborted. And a row another worker inserted meanwhile (a result of a
    # URL not yet discovered) does not abort the chunk.
    import threading
    import time

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
    import time

    from increcrawl_scrapy.testing import SampleSite
    from tests.crawling import crawl_settings, run_crawl

    dsn = own_server.create_database("crawled")
    with SampleSite(pages=40) as site:
        settings = crawl_settings(dsn, clock, INCRECRAWL_FLUSH_ITEMS=5, CONCURRENT_REQUESTS=2)
        restarted = threading.Event()

        def restart_when_fetching() -> None:
            deadline = time.monotonic() + 30
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
