"""SQLite's file: a file that is not ours refused and left untouched, older schemas
migrated and newer ones refused, WAL mode, results buffered and flushed in batches."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from increcrawl_scrapy.state import MIGRATIONS, SCHEMA_VERSION, StateError, StateStore
from tests.conftest import Clock
from tests.state.scenario import SEED, discover


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> StateStore:
    """SQLite only, the default policy: this module is about SQLite's file."""
    with StateStore(tmp_path / "state.sqlite", clock=clock) as s:
        yield s


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
