"""SQLite's locks and crash safety: one crawl per database (through a symlink too),
another process's write waited for a bounded time, a SIGKILL inside a batch's write
leaving a sound database with whole batches only."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from increcrawl_scrapy.state import StateLockedError, StateStore
from tests.state.scenario import SEED


def test_a_symlinked_database_takes_the_same_crawl_lock(tmp_path: Path) -> None:
    real = tmp_path / "real.sqlite"
    link = tmp_path / "link.sqlite"
    link.symlink_to(real)
    with (
        StateStore(real, exclusive=True),
        pytest.raises(StateLockedError, match="in use by another crawl"),
    ):
        StateStore(link, exclusive=True)


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
        # It waited its 0.5 s, then gave up long before the holder's 30 s.
        assert 0.4 < time.monotonic() - started < 20
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


_CLOSED_UNDER_A_STATEMENT = """
import sys, threading, time
from increcrawl_scrapy.state import StateStore

LONG = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000) "
        "SELECT count(*) FROM c")
for n in range(5):
    store = StateStore(sys.argv[1] + str(n))
    mutex = store.database.mutex
    in_statement = threading.Event()
    errors = []

    def work():
        # Statements under the mutex, as every method of the store's
        # parts holds it (discovery's writes, lookups).
        try:
            for _ in range(3):
                with mutex:
                    in_statement.set()
                    store.database.execute(LONG).fetchall()
                time.sleep(0.05)  # the mutex is not fair: the close takes it now
        except Exception as exc:  # after the close: an error, no crash
            errors.append(type(exc).__name__)

    flush = store.results.close

    def flushed_then_taken():
        # The close's own flush held the mutex; the thread waiting for it starts
        # a statement the moment it is free, before the connection is closed.
        flush()
        mutex.release()
        in_statement.wait()

    store.results.close = flushed_then_taken
    mutex.acquire()
    thread = threading.Thread(target=work)
    thread.start()
    time.sleep(0.05)  # the thread waits for the mutex
    store.close()
    thread.join()
    assert errors == ["ProgrammingError"], errors
print("closed", n + 1)
"""


def test_a_store_closed_while_a_thread_runs_a_statement_waits_for_it(tmp_path: Path) -> None:
    """The crawl's end closes the store on the reactor's thread while a worker thread
    may still be inside a statement (discovery, a lookup): closing the connection
    under it crashed the process (a segmentation fault in CI)."""
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", _CLOSED_UNDER_A_STATEMENT, f"{tmp_path}/s"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "closed 5"
