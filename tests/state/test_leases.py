"""Leases on a shared PostgreSQL state (state/postgres/leases.py), against a real server:
concurrent workers never hold the same page, a dead worker's pages come back only
when its leases expire, and a worker presumed dead cannot overwrite the result of
the one that took its pages over."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from increcrawl_scrapy.state.postgres import schema as pg_schema
from increcrawl_scrapy.state.postgres.leases import claim, fenced_update, release

SEED = "https://example.com/sitemap.xml"
T = 1_700_000_000.0
MINUTE = 60.0


@pytest.fixture
def shared(postgres_dsn: str):
    """A migrated state with 100 due pages; yields a connection factory."""
    import psycopg

    opened = []

    def connect():
        connection = psycopg.connect(postgres_dsn, autocommit=True)
        opened.append(connection)
        return connection

    setup = connect()
    pg_schema.migrate(setup)
    setup.execute(
        "INSERT INTO pages (normalized_url, url, seed, first_seen, interval_s, next_check) "
        "SELECT 'https://example.com/p' || i, 'https://example.com/p' || i, %s, %s, 86400, "
        "%s - i FROM generate_series(1, 100) AS i",
        (SEED, T - MINUTE, T),
    )
    yield connect
    for connection in opened:
        connection.close()


def test_concurrent_workers_claim_disjoint_batches(shared) -> None:
    taken: dict[str, list[str]] = {}
    # Connected first, claiming together: on a busy machine the first thread started
    # once took all 100 before the others had connected.
    ready = threading.Barrier(4)

    def worker(name: str) -> None:
        connection = shared()
        mine = taken.setdefault(name, [])
        ready.wait(timeout=60)
        while batch := claim(connection, SEED, name, 7, now=T, seconds=MINUTE):
            mine.extend(lease.key for lease in batch)
            time.sleep(0.005)  # a worker's own work between claims lets the others in

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    everything = [key for keys in taken.values() for key in keys]
    assert len(everything) == len(set(everything)) == 100
    assert sum(1 for keys in taken.values() if keys) >= 2  # they did share the work
    assert claim(shared(), SEED, "late", 10, now=T + 1, seconds=MINUTE) == []


def test_the_queue_order_is_kept(shared) -> None:
    first = claim(shared(), SEED, "a", 3, now=T, seconds=MINUTE)
    # next_check = T - i: the most overdue (p100) first.
    assert [lease.key for lease in first] == [f"https://example.com/p{i}" for i in (100, 99, 98)]


def test_an_expired_lease_is_claimed_again_with_a_larger_token(shared) -> None:
    a, b = shared(), shared()
    held = claim(a, SEED, "a", 100, now=T, seconds=MINUTE)
    assert claim(b, SEED, "b", 100, now=T + MINUTE / 2, seconds=MINUTE) == []
    taken = claim(b, SEED, "b", 100, now=T + MINUTE + 1, seconds=MINUTE)
    assert {lease.key for lease in taken} == {lease.key for lease in held}
    assert min(lease.token for lease in taken) > max(lease.token for lease in held)


def test_a_worker_presumed_dead_cannot_overwrite_its_successor(shared) -> None:
    a, b = shared(), shared()
    (stale,) = claim(a, SEED, "a", 1, now=T, seconds=MINUTE)
    (current,) = claim(b, SEED, "b", 1, now=T + 2 * MINUTE, seconds=MINUTE)
    assert current.key == stale.key
    result = {"next_check": T + 86_400, "content_hash": "from b", "last_status": 200}
    late = {"next_check": T + 3_600, "content_hash": "from a", "last_status": 200}
    assert fenced_update(b, current, result)
    assert not fenced_update(a, stale, late)  # comes back after b took over: refused
    row = a.execute(
        "SELECT content_hash, next_check FROM pages WHERE normalized_url = %s", (stale.key,)
    ).fetchone()
    assert row == ("from b", T + 86_400)
    assert a.execute("SELECT count(*) FROM leases").fetchone()[0] == 0  # released
    assert not fenced_update(b, current, result)  # and a lease is used once


def test_a_recorded_page_is_not_claimed_again(shared) -> None:
    connection = shared()
    leases = claim(connection, SEED, "a", 100, now=T, seconds=MINUTE)
    for lease in leases[:60]:
        assert fenced_update(connection, lease, {"next_check": T + 86_400})
    assert release(connection, leases[60:]) == 40  # given back unfetched
    again = claim(connection, SEED, "b", 100, now=T + 1, seconds=MINUTE)
    assert {lease.key for lease in again} == {lease.key for lease in leases[60:]}


def test_a_killed_workers_pages_wait_for_their_leases_to_expire(shared, postgres_dsn) -> None:
    worker = (
        "import json, os, signal, sys, psycopg\n"
        "from increcrawl_scrapy.state.postgres.leases import claim\n"
        "connection = psycopg.connect(sys.argv[1], autocommit=True)\n"
        f"leases = claim(connection, {SEED!r}, 'doomed', 30, now={T}, seconds={MINUTE})\n"
        "print(json.dumps([lease.key for lease in leases]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)  # no release, no goodbye\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", worker, postgres_dsn],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -9, done.stderr
    doomed = set(json.loads(done.stdout))
    assert len(doomed) == 30
    survivor = shared()
    before = claim(survivor, SEED, "survivor", 100, now=T + 1, seconds=MINUTE)
    assert len(before) == 70 and not doomed & {lease.key for lease in before}
    # Past the dead worker's expiry, before the survivor's own (it claimed a second later).
    after = claim(survivor, SEED, "survivor", 100, now=T + MINUTE + 0.5, seconds=MINUTE)
    assert {lease.key for lease in after} == doomed


def test_workers_are_counted_by_heartbeat(shared) -> None:
    from increcrawl_scrapy.state.postgres.workers import beat, leave

    connection = shared()
    assert beat(connection, "a", SEED, now=T, ttl=6) == (1, 1)
    assert beat(connection, "b", SEED, now=T + 1, ttl=6) == (2, 2)
    assert beat(connection, "c", "https://other.example/sitemap.xml", now=T + 2, ttl=6) == (1, 3)
    # a stops beating (it died): gone from the count once its ttl has passed
    assert beat(connection, "b", SEED, now=T + 7, ttl=6) == (1, 2)
    leave(connection, "b")
    assert beat(connection, "c", "https://other.example/sitemap.xml", now=T + 8, ttl=6) == (1, 1)


def test_leases_long_expired_are_cleaned_up_by_a_claim(shared) -> None:
    # Leases kept after failed fetches on rows no longer due, and leases of a dead
    # worker no one took over: gone once expired for longer than a lease lasts.
    connection = shared()
    held = claim(connection, SEED, "dead", 100, now=T, seconds=MINUTE)
    connection.execute("UPDATE pages SET next_check = %s", (T + 86_400,))  # none due now
    connection.execute("UPDATE leases SET kept = 1 WHERE normalized_url LIKE '%%1'")
    assert claim(connection, SEED, "b", 10, now=T + 1.5 * MINUTE, seconds=MINUTE) == []
    assert connection.execute("SELECT count(*) FROM leases").fetchone()[0] == len(held)
    assert claim(connection, SEED, "b", 10, now=T + 2 * MINUTE + 1, seconds=MINUTE) == []
    assert connection.execute("SELECT count(*) FROM leases").fetchone()[0] == 0


def test_a_lease_does_not_block_a_normalization_change(postgres_dsn: str) -> None:
    # A page whose fetch failed keeps its lease; the next crawl, with other
    # normalization settings, re-keys the page and its lease with it.
    from functools import partial

    from increcrawl_scrapy.state import StateStore
    from increcrawl_scrapy.urls import normalize_url

    def opened(strip: bool) -> StateStore:
        return StateStore(
            postgres_dsn,
            normalize=partial(normalize_url, strip_trailing_slash=strip),
            normalization={"strip_trailing_slash": strip},
        )

    with opened(False) as store:
        store.start_run(SEED).upsert([("https://example.com/docs/", None)])
        (page,) = store.due(SEED)
        store.record(page.url, None, seed=SEED, key=page.normalized_url)  # stays due
    with opened(True) as store:
        assert store.rekeyed.rekeyed == 1
        assert store.get("https://example.com/docs") is not None
        keys = store.database.execute("SELECT normalized_url FROM leases").fetchall()
        assert [key for (key,) in keys] == ["https://example.com/docs"]


def test_a_fetch_budget_is_shared_out_in_claims_of_the_usual_size(postgres_dsn: str) -> None:
    # INCRECRAWL_MAX_FETCHES on a shared state: each worker claims the budget's rows
    # 100 at a time, as the queue's, so a second worker gets its share.
    from increcrawl_scrapy.state import StateStore

    first, second = StateStore(postgres_dsn), StateStore(postgres_dsn)
    try:
        first.start_run(SEED).upsert([(f"https://example.com/p{i}", None) for i in range(300)])
        mine = first.due_chunks(SEED, limit=250)
        assert len(next(mine)) == 100
        theirs = [page for chunk in second.due_chunks(SEED, limit=250) for page in chunk]
        assert len(theirs) == 150  # the rest of the budget's rows
        assert sum(len(chunk) for chunk in mine) == 0  # all leased by the other now
    finally:
        first.close()
        second.close()


def test_a_worker_whose_clock_is_ahead_takes_no_live_lease(postgres_dsn: str) -> None:
    # Leases are timed by the server's clock: a worker 11 minutes ahead (its leases
    # of 600 s would all look expired to it) takes none of another's live leases,
    # and the workers count each other alive.
    from increcrawl_scrapy.state import StateStore
    from tests.conftest import Clock

    on_time = Clock()
    ahead = Clock(on_time.now + 11 * MINUTE)
    first = StateStore(postgres_dsn, clock=on_time)
    second = StateStore(postgres_dsn, clock=ahead)
    try:
        first.start_run(SEED).upsert([(f"https://example.com/p{i}", None) for i in range(50)])
        assert len(first.due(SEED)) == 50
        assert second.due(SEED) == []
        assert first.heartbeat(SEED, ttl=6.0) == (1, 1)
        assert second.heartbeat(SEED, ttl=6.0) == (2, 2)
    finally:
        first.close()
        second.close()


def test_leases_of_pages_in_flight_are_renewed_by_the_heartbeat(postgres_dsn: str) -> None:
    # A batch job that takes longer than a lease: its worker beats, and the leases of
    # the pages it still fetches are renewed, so no other worker takes them.
    import time

    from increcrawl_scrapy.state import StateStore

    slow = StateStore(postgres_dsn, lease_seconds=2.0)
    other = StateStore(postgres_dsn, lease_seconds=2.0)
    try:
        slow.start_run(SEED).upsert([(f"https://example.com/p{i}", None) for i in range(10)])
        pages = slow.due(SEED)
        assert len(pages) == 10
        for _ in range(8):  # 4 s: twice the lease
            slow.heartbeat(SEED, ttl=6.0)
            time.sleep(0.5)
        assert other.due(SEED) == []
        for page in pages:
            slow.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
        assert slow.flush() == 10  # none lost to a takeover
        assert slow.results.leases_lost == 0
    finally:
        slow.close()
        other.close()
