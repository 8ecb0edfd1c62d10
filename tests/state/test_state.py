from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from increcrawl_scrapy.schedule.rows import Outcome
from increcrawl_scrapy.state import (
    MIGRATIONS,
    SCHEMA_VERSION,
    StateError,
    StateLockedError,
    StateStore,
)
from tests.conftest import Clock

HOUR, DAY = 3600.0, 86400.0
SEED = "https://example.com/sitemap.xml"


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> StateStore:
    with StateStore(tmp_path / "state.sqlite", clock=clock) as s:
        yield s


def discover(store: StateStore, seed: str, urls: list[str], lastmod: str | None = None) -> int:
    run = store.start_run(seed)
    run.upsert([(u, lastmod) for u in urls])
    run.apply_lastmod()
    return run


def test_a_whole_schedule_history(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/page"
    t0 = clock.now
    discover(store, SEED, [url])
    assert [p.normalized_url for p in store.due(SEED)] == [url]

    got = store.record(url, 200, seed=SEED, content_hash="h1")
    assert got.outcome is Outcome.NEW
    assert (got.page.interval_s, got.page.next_check) == (DAY, t0 + DAY)
    assert store.due(SEED) == []

    expected_interval = DAY
    for _ in range(3):
        clock.now = store.get(url).next_check
        expected_interval *= 1.5
        got = store.record(url, 200, seed=SEED, content_hash="h1")
        assert got.outcome is Outcome.UNCHANGED
        assert got.page.interval_s == expected_interval
        assert got.page.next_check == clock.now + expected_interval
    assert expected_interval == 3.375 * DAY

    clock.now = store.get(url).next_check
    got = store.record(url, 200, seed=SEED, content_hash="h2")
    assert got.outcome is Outcome.CHANGED
    assert got.page.interval_s == 3.375 * DAY / 2
    assert got.page.next_check == clock.now + 3.375 * DAY / 2
    assert (got.page.change_count, got.page.fetch_count) == (1, 5)
    assert got.page.last_changed == clock.now

    clock.now = store.get(url).next_check
    got = store.record(url, 410, seed=SEED)
    assert got.outcome is Outcome.GONE
    assert got.page.gone is True
    # Still listed: re-checked slowly (twice the default interval), not at once.
    assert got.page.next_check == clock.now + 2 * DAY
    clock.advance(2 * DAY - 1)
    assert store.due(SEED) == []
    clock.advance(1)
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    again = store.record(url, 410, seed=SEED)
    assert again.outcome is Outcome.STILL_GONE and again.outcome.change == "unchanged"
    assert again.page.next_check == clock.now + 4 * DAY  # the wait doubles
    assert again.page.change_count == got.page.change_count  # gone is reported once
    store.close()
    reopened = StateStore(store.path, clock=clock)
    page = reopened.get(url)
    assert page.gone and page.content_hash == "h2" and page.fetch_count == 7
    reopened.close()


def test_not_modified_keeps_hash_and_updates_validators(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/v"
    discover(store, SEED, [url])
    store.record(url, 200, seed=SEED, content_hash="h", validators=('"e1"', None))
    clock.advance(DAY)
    got = store.record(url, 304, seed=SEED, validators=('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT"))
    assert got.outcome is Outcome.NOT_MODIFIED
    assert got.page.content_hash == "h"
    assert (got.page.etag, got.page.last_modified) == ('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT")
    assert got.page.interval_s == 1.5 * DAY
    # A 304 without validators (RFC 9110 allows it) keeps the stored ones.
    clock.advance(DAY)
    got = store.record(url, 304, seed=SEED, validators=(None, None))
    assert (got.page.etag, got.page.last_modified) == ('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT")
    # A Geonode result (no validators) with the same content: they still describe it.
    clock.advance(2 * DAY)
    got = store.record(url, 200, seed=SEED, content_hash="h")
    assert got.page.etag == '"e2"'
    # New content the fetcher could not see validators for: the old ones are stale.
    clock.advance(2 * DAY)
    got = store.record(url, 200, seed=SEED, content_hash="h2")
    assert got.outcome is Outcome.CHANGED
    assert (got.page.etag, got.page.last_modified) == (None, None)


def test_results_are_recorded_on_the_key_the_queue_handed_out(
    store: StateStore, clock: Clock
) -> None:
    discover(store, SEED, ["https://example.com/a/"])
    [page] = store.due(SEED)
    got = store.record(
        "https://cdn.example.net/final",
        200,
        seed=SEED,
        key=page.normalized_url,
        content_hash="h",
        final_url="https://cdn.example.net/final",
    )
    assert got.page.normalized_url == page.normalized_url and store.count() == 1
    assert store.get(page.url).final_url == "https://cdn.example.net/final"


def test_changed_normalization_settings_rekey_rows_and_merge_collisions(
    tmp_path: Path, clock: Clock
) -> None:
    from functools import partial

    from increcrawl_scrapy.urls import normalize_url

    path = tmp_path / "n.sqlite"

    def opened(strip: bool) -> StateStore:
        return StateStore(
            path,
            clock=clock,
            normalize=partial(normalize_url, strip_trailing_slash=strip),
            normalization={"strip_trailing_slash": strip},
        )

    with opened(False) as store:
        discover(
            store,
            SEED,
            ["https://example.com/docs/", "https://example.com/docs", "https://example.com/a/"],
        )
        store.record("https://example.com/docs", 200, seed=SEED, content_hash="old")
        clock.advance(HOUR)
        store.record("https://example.com/docs/", 200, seed=SEED, content_hash="recent")
        assert store.count() == 3
    with opened(True) as store:
        assert (store.rekeyed.rekeyed, store.rekeyed.merged) == (2, 1)
        assert store.count() == 2
        assert store.get("https://example.com/docs").content_hash == "recent"
        assert store.get("https://example.com/a").normalized_url == "https://example.com/a"
    with opened(True) as store:  # settings as stored: nothing to do
        assert store.rekeyed.rekeyed == 0


def test_a_symlinked_database_takes_the_same_crawl_lock(tmp_path: Path) -> None:
    real = tmp_path / "real.sqlite"
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    with (
        StateStore(real, exclusive=True),
        pytest.raises(StateLockedError, match="in use by another crawl"),
    ):
        StateStore(link, exclusive=True)


def test_errors_leave_the_schedule_untouched(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/e"
    discover(store, SEED, [url])
    before = store.record(url, 200, seed=SEED, content_hash="h").page
    clock.now = before.next_check
    for status in (500, 503, None, 403):
        got = store.record(url, status, seed=SEED)
        assert got.outcome is Outcome.ERROR
    after = store.get(url)
    assert after.error_count == 4
    assert (after.next_check, after.interval_s, after.content_hash, after.fetch_count) == (
        before.next_check,
        before.interval_s,
        before.content_hash,
        before.fetch_count,
    )
    assert [p.normalized_url for p in store.due(SEED)] == [url]


def test_normalization_variants_are_one_row(store: StateStore) -> None:
    discover(
        store,
        SEED,
        [
            "https://Example.com/a/",
            "https://example.com:443/a?utm_source=x",
            "https://example.com/a#frag",
        ],
    )
    assert store.count() == 1
    store.record("HTTPS://EXAMPLE.COM/a/", 200, seed=SEED, content_hash="h")
    assert store.get("https://example.com/a").fetch_count == 1


def test_changed_lastmod_makes_a_row_due_now(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/l"
    discover(store, SEED, [url], lastmod="2023-01-01")
    store.record(url, 200, seed=SEED, content_hash="h")
    clock.advance(HOUR)
    discover(store, SEED, [url], lastmod="2023-01-01")
    assert store.due(SEED) == []
    discover(store, SEED, [url], lastmod="2023-01-02")
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    assert store.get(url).sitemap_lastmod == "2023-01-02"


def test_missing_runs_lead_to_a_confirming_fetch_not_to_gone(
    store: StateStore, clock: Clock
) -> None:
    kept, dropped = "https://example.com/kept", "https://example.com/dropped"
    run = discover(store, SEED, [kept, dropped])
    run.mark_missing()
    for url in (kept, dropped):
        store.record(url, 200, seed=SEED, content_hash="h")
    for n in (1, 2, 3):
        clock.advance(HOUR)
        run = discover(store, SEED, [kept])
        result = run.mark_missing()
        assert result.marked == 1
        assert store.get(dropped).missing_runs == n
        due = [p.normalized_url for p in store.due(SEED)]
        assert due == ([dropped] if n == 3 else [])
        assert result.due == (1 if n == 3 else 0)
    # The confirming fetch finds it alive; later runs do not force another one.
    store.record(dropped, 200, seed=SEED, content_hash="h")
    for n in (4, 5):
        clock.advance(HOUR)
        result = discover(store, SEED, [kept]).mark_missing()
        assert store.get(dropped).missing_runs == n
        assert result.due == 0 and store.due(SEED) == []
    assert store.get(dropped).gone is False
    assert store.get(kept).missing_runs == 0


def test_missing_marking_is_scoped_to_the_run_seed(store: StateStore) -> None:
    other = "https://other.example/sitemap.xml"
    discover(store, SEED, ["https://example.com/a"])
    discover(store, other, ["https://other.example/b"])
    run = discover(store, SEED, [])
    assert run.mark_missing().marked == 1
    assert store.get("https://example.com/a").missing_runs == 1
    assert store.get("https://other.example/b").missing_runs == 0


def test_a_gone_page_still_listed_is_rechecked_and_comes_back_as_new(
    store: StateStore, clock: Clock
) -> None:
    url = "https://example.com/g"
    discover(store, SEED, [url], lastmod="2023-01-01")
    store.record(url, 200, seed=SEED, content_hash="h")
    clock.advance(2 * DAY)
    assert store.record(url, 404, seed=SEED).outcome is Outcome.GONE
    clock.advance(HOUR)
    discover(store, SEED, [url], lastmod="2023-01-01")
    assert store.due(SEED) == []  # a slow re-check, not every run
    discover(store, SEED, [url], lastmod="2023-01-05")  # its date moved: at once
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    back = store.record(url, 200, seed=SEED, content_hash="h")
    assert back.outcome is Outcome.NEW and back.page.gone is False
    assert back.page.interval_s == DAY and back.page.error_streak == 0


def test_a_gone_page_no_longer_listed_is_not_rechecked(store: StateStore, clock: Clock) -> None:
    url, other = "https://example.com/g", "https://example.com/o"
    discover(store, SEED, [url, other]).mark_missing()
    store.record(url, 410, seed=SEED)
    for _ in range(3):
        clock.advance(30 * DAY)
        discover(store, SEED, [other]).mark_missing()
        assert url not in {p.normalized_url for p in store.due(SEED)}
    assert store.get(url).gone and store.get(url).missing_runs == 3


def test_site_failures_back_off_and_api_failures_stay_due(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/f"
    discover(store, SEED, [url])
    waits = []
    for _ in range(4):
        got = store.record(url, 403, seed=SEED, site_failure=True)
        waits.append(got.page.next_check - clock.now)
        clock.now = got.page.next_check
    assert waits == [HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR]
    assert store.get(url).error_streak == 4
    for _ in range(3):  # the API or the transport failed: no evidence about the page
        assert store.record(url, None, seed=SEED).page.next_check == clock.now
    ok = store.record(url, 200, seed=SEED, content_hash="h").page
    assert ok.error_streak == 0 and ok.next_check == clock.now + DAY
    assert store.record(url, 500, seed=SEED, site_failure=True).page.next_check == (
        clock.now + HOUR  # the streak started over
    )


def test_queue_is_oldest_first_and_limited(store: StateStore, clock: Clock) -> None:
    urls = [f"https://example.com/{i}" for i in range(5)]
    discover(store, SEED, urls)
    for i, url in enumerate(urls):
        clock.advance(10)
        store.record(url, 200, seed=SEED, content_hash=str(i))
    clock.advance(2 * DAY)
    due = store.due(SEED, limit=3)
    assert [p.normalized_url for p in due] == urls[:3]


def test_results_are_buffered_then_flushed_in_one_batch(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "s.sqlite"
    store = StateStore(path, clock=clock, flush_items=3, flush_seconds=3600)
    discover(store, SEED, [f"https://example.com/{i}" for i in range(3)])
    peek = sqlite3.connect(path)

    def fetched() -> int:
        return peek.execute("SELECT count(*) FROM pages WHERE fetch_count > 0").fetchone()[0]

    store.record("https://example.com/0", 200, seed=SEED, content_hash="a")
    store.record("https://example.com/1", 200, seed=SEED, content_hash="b")
    assert fetched() == 0  # nothing committed per row
    assert store.get("https://example.com/0").fetch_count == 1  # but visible to the owner
    store.record("https://example.com/2", 200, seed=SEED, content_hash="c")
    assert fetched() == 3
    store.record("https://example.com/0", 200, seed=SEED, content_hash="a")
    store.close()
    assert (
        peek.execute("SELECT fetch_count FROM pages WHERE normalized_url LIKE '%/0'").fetchone()[0]
        == 2
    )


def test_flush_on_elapsed_time(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "t.sqlite"
    store = StateStore(path, clock=clock, flush_items=1000, flush_seconds=0.05)
    discover(store, SEED, ["https://example.com/0", "https://example.com/1"])
    store.record("https://example.com/0", 200, seed=SEED, content_hash="a")
    time.sleep(0.1)
    store.record("https://example.com/1", 200, seed=SEED, content_hash="b")
    peek = sqlite3.connect(path)
    assert peek.execute("SELECT count(*) FROM pages WHERE fetch_count = 1").fetchone()[0] == 2
    store.close()


def test_record_for_an_undiscovered_url_inserts_it(store: StateStore) -> None:
    got = store.record("https://example.com/own?utm_medium=x", 200, seed="shop", content_hash="h")
    assert got.outcome is Outcome.NEW
    page = store.get("https://example.com/own")
    assert page.seed == "shop" and page.content_hash == "h"


def test_runs_are_recorded(store: StateStore, clock: Clock) -> None:
    run = store.start_run(SEED)
    assert store.runs(SEED)[0]["finished_at"] is None  # unfinished until finished
    clock.advance(5)
    run.finish(
        {"new": 3, "due": 4, "api_requests": 4},
        discovery_complete=True,
        close_reason="finished",
    )
    row = store.runs(SEED)[0]
    assert (row["new"], row["due"], row["api_requests"], row["discovery_complete"]) == (3, 4, 4, 1)
    assert row["finished_at"] == row["started_at"] + 5 and row["close_reason"] == "finished"
    with pytest.raises(ValueError):
        run.finish({"bogus": 1}, discovery_complete=True)


def test_file_that_is_not_a_database_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "notes.sqlite"
    path.write_bytes(b"these are my notes, not a database\n" * 100)
    before = path.read_bytes()
    with pytest.raises(StateError, match=r"not an increcrawl state database.*left untouched"):
        StateStore(path)
    assert path.read_bytes() == before


def test_foreign_sqlite_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE customers (id INTEGER)")
    db.commit()
    db.close()
    with pytest.raises(StateError, match=r"another program"):
        StateStore(path)
    tables = sqlite3.connect(path).execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("customers",)]


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    StateStore(path).close()
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(StateError, match=r"newer"):
        StateStore(path)


def test_older_schema_is_migrated_in_place(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "v1.sqlite"
    db = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("PRAGMA application_id = 1229144914")
    db.execute("PRAGMA user_version = 1")
    db.execute(
        "INSERT INTO pages (normalized_url, url, seed, first_seen, interval_s, content_hash) "
        "VALUES ('https://example.com/old', 'https://example.com/old', ?, 1, 86400, 'h')",
        (SEED,),
    )
    db.commit()
    db.close()
    with StateStore(path, clock=clock) as store:
        assert store.get("https://example.com/old").content_hash == "h"
        assert [p.normalized_url for p in store.due(SEED)] == ["https://example.com/old"]
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION


def test_wal_mode(store: StateStore) -> None:
    mode = sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_second_crawl_on_the_same_database_stops_with_a_message(tmp_path: Path) -> None:
    path = tmp_path / "busy.sqlite"
    first = StateStore(path, exclusive=True)
    with pytest.raises(StateLockedError, match=r"in use by another crawl \(pid \d+\)"):
        StateStore(path, exclusive=True)
    first.close()
    StateStore(path, exclusive=True).close()  # free again once the first closed


HOLD_WRITE = textwrap.dedent(
    """
    import sqlite3, sys, time
    db = sqlite3.connect(sys.argv[1], isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute("UPDATE runs SET errors = errors + 1")
    print("holding", flush=True)
    time.sleep(float(sys.argv[2]))
    db.execute("COMMIT")
    """
)


def test_second_process_waits_a_bounded_time_then_stops(tmp_path: Path) -> None:
    path = tmp_path / "locked.sqlite"
    StateStore(path).close()
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE, str(path), "30"], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout.readline().strip() == "holding"
        store = StateStore(path, lock_timeout=0.5)
        started = time.monotonic()
        with pytest.raises(
            StateLockedError, match=r"in use by another program .locked for more than 0.5s"
        ):
            store.start_run(SEED)
        assert 0.4 < time.monotonic() - started < 10
        store.close()
        holder.kill()


def test_second_process_waits_for_a_short_write(tmp_path: Path) -> None:
    path = tmp_path / "short.sqlite"
    StateStore(path).close()
    with subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE, str(path), "1"], stdout=subprocess.PIPE, text=True
    ) as holder:
        assert holder.stdout.readline().strip() == "holding"
        with StateStore(path, lock_timeout=20) as store:
            started = time.monotonic()
            run = store.start_run(SEED)
            assert time.monotonic() - started > 0.3  # it waited for the holder
            assert run.id == 1


WRITER = textwrap.dedent(
    """
    import sys, time
    from increcrawl_scrapy.state import StateStore
    store = StateStore(sys.argv[1], flush_items=10**9, flush_seconds=10**9)
    target = int(sys.argv[2])

    def inside_the_write():
        # Called by SQLite while it executes the flush of the target batch.
        print("inside", flush=True)
        time.sleep(60)  # the parent kills us here

    for batch in range(target + 1):
        for i in range(2000):
            store.record(f"https://example.com/{batch}/{i}", 200, seed="s", content_hash="h")
        if batch == target:
            store.database.connection.set_progress_handler(inside_the_write, 500)
        store.flush()
        print(batch, flush=True)
    """
)


@pytest.mark.parametrize("flushed_before_kill", [3, 6])
def test_sigkill_mid_batch_keeps_the_database_sound(
    tmp_path: Path, flushed_before_kill: int
) -> None:
    path = tmp_path / "killed.sqlite"
    last = -1
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(flushed_before_kill)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    ) as writer:
        for line in writer.stdout:
            if line.strip() == "inside":
                break  # the target batch's transaction is being written now
            last = int(line)
        writer.send_signal(signal.SIGKILL)
    assert last + 1 == flushed_before_kill
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    present = {int(url.split("/")[3]) for (url,) in db.execute("SELECT normalized_url FROM pages")}
    for batch in range(last + 1):
        count = db.execute(
            "SELECT count(*) FROM pages WHERE normalized_url LIKE ?",
            (f"https://example.com/{batch}/%",),
        ).fetchone()[0]
        assert count == 2000, f"batch {batch} flushed before the kill is incomplete"
    # The write the kill interrupted left nothing: no half-written batch.
    assert present == set(range(last + 1))
    with StateStore(path) as store:
        assert store.count() == 2000 * (last + 1)


def test_an_identical_sitemap_is_not_applied_again(store: StateStore, clock: Clock) -> None:
    child = "https://example.com/sitemap-1.xml"
    urls = [f"https://example.com/{i}" for i in range(3)]
    run = store.start_run(SEED)
    assert run.sitemap_unchanged(child, "d1") is False
    run.upsert([(u, None) for u in urls], sitemap_url=child)
    run.sitemap_read(child, "d1")
    run.mark_missing()
    # Next run: same digest, nothing applied, and its rows are not missing.
    clock.advance(3600)
    run = store.start_run(SEED)
    assert run.sitemap_unchanged(child, "d1") is True
    assert run.mark_missing().marked == 0
    # The child changes and drops a URL: that row is missing from then on,
    # also in later runs where the (new) child is unchanged.
    for n in (1, 2, 3):
        clock.advance(3600)
        run = store.start_run(SEED)
        if not run.sitemap_unchanged(child, "d2"):
            run.upsert([(u, None) for u in urls[:2]], sitemap_url=child)
            run.sitemap_read(child, "d2")
        run.mark_missing()
        assert store.get(urls[2]).missing_runs == n
        assert store.get(urls[0]).missing_runs == 0


def test_duplicates_in_one_chunk_are_one_row_with_the_first_spelling(store: StateStore) -> None:
    run = store.start_run(SEED)
    entries = [("https://example.com/a", "2024-01-01")] + [("https://EXAMPLE.com/a/", None)] * 1000
    assert run.upsert(entries) == 1
    assert store.get("https://example.com/a").url == "https://example.com/a"


def test_a_later_run_ends_the_discovery_of_the_earlier_one(store: StateStore) -> None:
    first = store.start_run(SEED)
    first.upsert([("https://example.com/x", None)])
    store.start_run(SEED)  # its discovery tables replace the first run's
    with pytest.raises(ValueError, match="is over"):
        first.upsert([("https://example.com/y", None)])
    with pytest.raises(ValueError, match="is over"):
        first.mark_missing()


def test_queued_rows_never_shadow_what_was_recorded(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/q"
    discover(store, SEED, [url])
    [queued] = store.due(SEED)
    assert store.get(url) == queued  # a read leaves the queue cache as it was
    store.record(url, 200, seed=SEED, content_hash="h")
    store.flush()
    page = store.get(url)
    assert page.content_hash == "h" and page.fetch_count == 1  # not the queued copy


def test_making_pages_due_keeps_their_missing_runs(store: StateStore, clock: Clock) -> None:
    urls = ["https://example.com/a", "https://example.com/b"]
    discover(store, SEED, urls)
    run = store.start_run(SEED)
    run.upsert([(urls[0], None)])
    run.mark_missing()  # b is absent once
    assert store.make_due(seed=SEED) == 2
    assert store.get(urls[1]).missing_runs == 1  # the operator's edit is no listing
    assert [p.normalized_url for p in store.due(SEED)] == urls
