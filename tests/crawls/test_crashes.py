"""`scrapy crawl incremental` killed at several points: the state survives."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from increcrawl_scrapy.geonode.reservations import RESERVE_AHEAD
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.support.process import crawl_command, crawl_env

KEY = "crash-key-0123456789"


def start_crawl(site: SampleSite, api: GeonodeStandIn, db: Path, *extra: str) -> subprocess.Popen:
    command = crawl_command(
        site.sitemap_url, db, "LOG_LEVEL=INFO", "GEONODE_BATCH_MIN_URLS=100000", api_url=api.url
    )
    return subprocess.Popen(
        [*command, *extra],
        env=crawl_env(KEY),
        cwd=db.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(
    db: Path, sql: str, at_least: int, process: subprocess.Popen, seconds: float = 60
) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-2000:]
        if db.exists():
            try:
                with sqlite3.connect(db, timeout=1) as con:
                    value = con.execute(sql).fetchone()[0]
            except sqlite3.OperationalError:
                value = 0
            if value >= at_least:
                return value
        time.sleep(0.02)
    raise AssertionError(f"{sql} never reached {at_least}")


def state(db: Path) -> tuple[str, int, int, list]:
    with sqlite3.connect(db) as con:
        return (
            con.execute("PRAGMA integrity_check").fetchone()[0],
            con.execute("SELECT count(*) FROM pages").fetchone()[0],
            con.execute("SELECT count(*) FROM pages WHERE last_fetched IS NOT NULL").fetchone()[0],
            con.execute("SELECT finished_at, close_reason FROM runs ORDER BY id").fetchall(),
        )


def finish(site: SampleSite, api: GeonodeStandIn, db: Path) -> str:
    process = start_crawl(site, api, db)
    _, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-2000:]
    return err


def test_sigkill_during_discovery(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=300_000, children=6) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        process = start_crawl(site, api, db, "-a", "discover_only=1")
        wait_for(db, "SELECT count(*) FROM pages", 1, process)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        integrity, rows, _, runs = state(db)
        assert integrity == "ok" and 0 < rows < 300_000
        assert runs == [(None, None)]  # the killed run is recorded as unfinished
        process = start_crawl(site, api, db, "-a", "discover_only=1")
        _, err = process.communicate(timeout=180)
        assert process.returncode == 0, err[-2000:]
        integrity, rows, _, runs = state(db)
        assert integrity == "ok" and rows == 300_000
        assert runs[-1][1] == "finished"


def test_sigkill_mid_fetch_keeps_every_flushed_result(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=60) as site, GeonodeStandIn(api_keys=[KEY], latency=0.05) as api:
        process = start_crawl(
            site, api, db, "-s", "INCRECRAWL_FLUSH_ITEMS=5", "-s", "GEONODE_CONCURRENCY=2"
        )
        flushed = wait_for(
            db, "SELECT count(*) FROM pages WHERE last_fetched IS NOT NULL", 10, process
        )
        process.send_signal(signal.SIGKILL)
        process.communicate()
        integrity, rows, fetched, runs = state(db)
        assert integrity == "ok" and rows == 60
        assert fetched >= flushed and fetched < 60
        assert runs == [(None, None)]
        before = api.counters()["requests"]["POST /v1/extract"]
        finish(site, api, db)
        integrity, rows, refetched, runs = state(db)
        assert integrity == "ok" and refetched == 60 and runs[-1][1] == "finished"
        # The next run fetched what the killed one had not recorded, and nothing else.
        assert api.counters()["requests"]["POST /v1/extract"] - before == 60 - fetched


def test_sigterm_ends_cleanly_with_state_flushed(tmp_path: Path) -> None:
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=60) as site, GeonodeStandIn(api_keys=[KEY], latency=0.05) as api:
        process = start_crawl(
            site,
            api,
            db,
            *("-s", "INCRECRAWL_FLUSH_ITEMS=1000", "-s", "INCRECRAWL_FLUSH_SECONDS=600"),
            *("-s", "GEONODE_CONCURRENCY=2"),
        )
        deadline = time.monotonic() + 300  # a bound on a hang
        while api.counters()["extractions"] < 5:  # some pages fetched...
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        assert state(db)[2] == 0  # ...none flushed yet
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=300)
        assert process.returncode == 0  # a clean exit
        integrity, _, fetched, runs = state(db)
        assert integrity == "ok"
        assert fetched >= 5  # flushed on the way out
        assert runs[-1][0] is not None and runs[-1][1] == "shutdown"
        assert api.counters()["tokens_charged"] >= fetched


def test_a_killed_runs_tokens_count_in_the_month(tmp_path: Path) -> None:
    # Tokens are written as they are spent, with the results: a run killed after
    # spending them (SIGKILL, OOM, a cancelled Scrapyd job) still spent them, and the
    # next run's share of INCRECRAWL_MONTHLY_TOKENS knows it.
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=60) as site, GeonodeStandIn(api_keys=[KEY], latency=0.2) as api:
        process = start_crawl(
            site, api, db, "-s", "INCRECRAWL_FLUSH_ITEMS=5", "-s", "GEONODE_CONCURRENCY=2"
        )
        wait_for(db, "SELECT count(*) FROM pages WHERE last_fetched IS NOT NULL", 10, process)
        process.send_signal(signal.SIGKILL)
        process.communicate()
        charged = api.counters()["tokens_charged"]
        assert state(db)[3] == [(None, None)]  # killed before it finished
        with sqlite3.connect(db) as con:
            (spent,) = con.execute("SELECT tokens_charged FROM runs").fetchone()
            (fetched,) = con.execute(
                "SELECT count(*) FROM pages WHERE last_fetched IS NOT NULL"
            ).fetchone()
        # What the state says was spent: at least what the API charged (every call
        # reserved its tokens in the state before it was sent), at most that and the
        # reservations of the calls in flight and the block ahead (#53, 3).
        assert fetched <= charged <= spent <= charged + 2 + RESERVE_AHEAD

        budget = 1000
        err = finish_with(site, api, db, "-s", f"INCRECRAWL_MONTHLY_TOKENS={budget}")
        left = next(line for line in err.splitlines() if "tokens left until the reset" in line)
        assert f"{budget - spent} tokens left" in left, left


def finish_with(site: SampleSite, api: GeonodeStandIn, db: Path, *extra: str) -> str:
    process = start_crawl(site, api, db, *extra)
    _, err = process.communicate(timeout=180)
    assert process.returncode == 0, err[-2000:]
    return err
