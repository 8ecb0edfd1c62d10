"""Ctrl-C on a crawl whose content worker is busy: the terminal sends SIGINT to the
whole process group, the worker too. The crawl shuts down as Scrapy does on Ctrl-C
(``finish_reason`` ``shutdown``, the run finalized, its lock let go) within a bound;
a worker's KeyboardInterrupt came back as a page's error, stopped the reactor and
left the run unfinished. A whole ``scrapy crawl`` process against nginx."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from increcrawl_scrapy.crawl.content_processes import START_AFTER
from tests.crawls.test_content_processes import _write_pages
from tests.servers import nginx, nginx_binary
from tests.support.process import crawl_command, crawl_env

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


#: More than the crawl takes before Ctrl-C.
PAGES = 300


def _fetched(db: Path) -> int:
    """Pages whose results are written (flushed every few)."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            sql = "SELECT count(*) FROM pages WHERE last_fetched IS NOT NULL"
            return int(con.execute(sql).fetchone()[0])
    except sqlite3.OperationalError:  # its tables not made yet
        return 0


@contextlib.contextmanager
def _heavy_crawl(tmp_path: Path, **popen: Any) -> Iterator[tuple[subprocess.Popen, Path, Path]]:
    """A whole ``scrapy crawl`` of PAGES heavy pages (trafilatura extracts 300
    paragraphs each) behind nginx, one explicit content worker, results flushed every
    few: more than it takes before the signal, so the worker has a page in hand and
    more queued. Yields the process, its state database and its log."""
    www, work = tmp_path / "www", tmp_path / "work"
    www.mkdir()
    work.mkdir()
    db, log = work / "state.sqlite", work / "crawl.log"
    with nginx(www, tmp_path / "nginx") as (url, _access):
        sitemap = _write_pages(www, url, PAGES, "div", paragraphs=300)
        command = crawl_command(
            sitemap,
            db,
            "INCRECRAWL_FETCHER=direct",
            "INCRECRAWL_CONTENT_PROCESSES=1",
            "INCRECRAWL_FLUSH_ITEMS=5",
            "LOG_LEVEL=INFO",
        )
        with log.open("w") as err:
            crawl = subprocess.Popen(
                command,
                env=crawl_env(None),
                cwd=work,
                stdout=subprocess.DEVNULL,
                stderr=err,
                **popen,
            )
        try:
            yield crawl, db, log
        finally:
            if crawl.poll() is None:  # its workers too, in a session of its own
                if popen.get("start_new_session"):
                    os.killpg(crawl.pid, signal.SIGKILL)
                else:
                    crawl.kill()
                crawl.wait()


def test_ctrl_c_with_a_busy_worker_shuts_the_crawl_down(tmp_path: Path) -> None:
    # Its own process group, as a terminal's job: SIGINT reaches every process.
    with _heavy_crawl(tmp_path, start_new_session=True) as (crawl, db, log):
        deadline = time.monotonic() + 300  # a bound on a hang
        # The worker answered pages (the first START_AFTER are the thread's).
        while _fetched(db) < START_AFTER + 8:
            assert crawl.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the worker never answered"
            time.sleep(0.05)
        os.killpg(crawl.pid, signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            crawl.wait(timeout=60)
        hung = crawl.poll() is None
    text = log.read_text()
    assert not hung, "the crawl was still running 60 s after Ctrl-C: " + text[-3000:]
    assert "worker process(es) from page" in text
    assert crawl.returncode == 0, text[-3000:]
    assert "'finish_reason': 'shutdown'" in text, text[-3000:]
    assert "KeyboardInterrupt" not in text and "A content process ended" not in text
    with sqlite3.connect(db) as con:
        runs = con.execute("SELECT finished_at IS NOT NULL, close_reason FROM runs").fetchall()
    assert runs == [(1, "shutdown")]
    assert START_AFTER + 8 <= _fetched(db) < PAGES
    assert not Path(f"{db}.lock.pid").exists()  # the crawl's lock let go


def _workers_of(parent: int) -> list[int]:
    """The content workers a process started (their parent, from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == parent and "pipe_pool" in (entry / "cmdline").read_text():
                    found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    return False


def test_a_worker_ends_with_a_crawl_killed_outright(tmp_path: Path) -> None:
    # SIGKILL (the OOM killer, a cancel past its grace) leaves the crawl no time to
    # shut its pool down: its worker, asleep on the pool's queue, lived on for ever
    # (its parent 1), holding the crawl's output pipes open (cron's mail, Scrapyd's
    # job never finished).
    workers: list[int] = []
    with _heavy_crawl(tmp_path) as (crawl, db, log):
        try:
            deadline = time.monotonic() + 300
            while _fetched(db) < START_AFTER + 8 or not workers:
                assert crawl.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker never answered"
                workers = _workers_of(crawl.pid)
                time.sleep(0.05)
            crawl.kill()
            crawl.wait()
            deadline = time.monotonic() + 10
            while any(map(_alive, workers)) and time.monotonic() < deadline:
                time.sleep(0.1)
            left = [pid for pid in workers if _alive(pid)]
        finally:
            for pid in workers:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)  # this test's crawl's own workers
    assert left == [], f"workers {left} outlived their crawl by 10 s"
