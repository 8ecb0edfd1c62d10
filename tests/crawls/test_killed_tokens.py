"""`scrapy crawl incremental` through the stand-in API, SIGKILLed at random moments:
what a call may spend is in the state before the call is sent, so the month never
counts fewer tokens than the API charged, and at most the bounded reservation more
(#53, 3)."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from increcrawl_scrapy.geonode.reservations import RESERVE_AHEAD
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.support.process import crawl_command, crawl_env

KEY = "tokens-key-0123456789"
CONCURRENCY = 4
PAGES = 200


def crawl(
    site: SampleSite, api: GeonodeStandIn, db: str, log: Path, *settings: str
) -> subprocess.Popen:
    command = crawl_command(
        site.sitemap_url,
        db,
        "LOG_LEVEL=INFO",
        f"GEONODE_CONCURRENCY={CONCURRENCY}",
        # Results written seldom: the tokens of many answers are not written with them.
        "INCRECRAWL_FLUSH_ITEMS=50",
        "INCRECRAWL_FLUSH_SECONDS=3600",
        *settings,
        api_url=api.url,
    )
    with log.open("a") as err:  # a file: a pipe nobody reads would stall the crawl
        return subprocess.Popen(
            command, env=crawl_env(KEY), cwd=log.parent, stdout=subprocess.DEVNULL, stderr=err
        )


def killed_mid_run(
    process: subprocess.Popen, api: GeonodeStandIn, after_ms: int, spending: str
) -> bool:
    """SIGKILL *after_ms* once this run sent its first *spending* call and the API
    charged a token since: whether the run was still going. (A batch job of a killed
    run goes on at the API: its tokens alone do not say this run spends.)"""
    sent = api.counters()["requests"].get(spending, 0)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, "the crawl ended before it spent a token"
        counters = api.counters()
        if counters["requests"].get(spending, 0) > sent:
            break
        time.sleep(0.005)
    charged = api.counters()["tokens_charged"]
    while api.counters()["tokens_charged"] == charged and time.monotonic() < deadline:
        assert process.poll() is None, "the crawl ended before it spent a token"
        time.sleep(0.005)
    time.sleep(after_ms / 1000)
    alive = process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    return alive


def recorded(db: str) -> int:
    """The tokens the state counts for its runs (what the month's total adds up)."""
    if db.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(db) as con:
            return int(
                con.execute("SELECT coalesce(sum(tokens_charged), 0) FROM runs").fetchone()[0]
            )
    with sqlite3.connect(db) as con:
        return int(con.execute("SELECT coalesce(sum(tokens_charged), 0) FROM runs").fetchone()[0])


def kills_never_undercount(
    tmp_path: Path, db: str, *settings: str, in_flight: int, spending: str = "POST /v1/extract"
) -> None:
    chance = random.Random(20261206)
    log = tmp_path / "crawl.log"
    with SampleSite(pages=PAGES) as site, GeonodeStandIn(api_keys=[KEY], latency=0.05) as api:
        for kill in range(1, 4):
            process = crawl(site, api, db, log, *settings)
            after_ms = chance.randint(0, 400)
            assert killed_mid_run(process, api, after_ms, spending), log.read_text()[-2000:]
            charged = api.counters()["tokens_charged"]
            # Never less than the API charged; more by at most what each killed run had
            # reserved and not spent: its calls in flight and the block ahead.
            assert charged <= recorded(db) <= charged + kill * (in_flight + RESERVE_AHEAD), (
                kill,
                charged,
                recorded(db),
            )
        process = crawl(site, api, db, log, *settings)
        assert process.wait(timeout=300) == 0, log.read_text()[-2000:]
        assert api.counters()["tokens_charged"] <= recorded(db)


def test_killed_runs_never_spend_tokens_the_month_does_not_know_of(tmp_path: Path) -> None:
    # Single extracts, GEONODE_CONCURRENCY of them in flight.
    db = str(tmp_path / "state.sqlite")
    kills_never_undercount(tmp_path, db, "GEONODE_BATCH_MIN_URLS=100000", in_flight=CONCURRENCY)


def test_killed_batch_jobs_never_spend_tokens_the_month_does_not_know_of(tmp_path: Path) -> None:
    # Batch jobs: every page of a job submitted is reserved before it is submitted.
    db = str(tmp_path / "state.sqlite")
    kills_never_undercount(
        tmp_path,
        db,
        "GEONODE_BATCH_MIN_URLS=10",
        "GEONODE_BATCH_POLL_INTERVAL=0.2",
        in_flight=PAGES,
        spending="POST /v1/batch",
    )


def test_killed_runs_on_postgresql_never_undercount(tmp_path: Path, postgres_dsn: str) -> None:
    kills_never_undercount(
        tmp_path,
        postgres_dsn,
        "GEONODE_BATCH_MIN_URLS=100000",
        # The pages a killed run leased are another run's once its leases lapse.
        "INCRECRAWL_LEASE_SECONDS=3",
        in_flight=CONCURRENCY,
    )


@pytest.mark.parametrize("batch_min_urls", [100000, 10])
def test_a_whole_run_records_exactly_what_was_charged(tmp_path: Path, batch_min_urls: int) -> None:
    db, log = str(tmp_path / "state.sqlite"), tmp_path / "crawl.log"
    with SampleSite(pages=60) as site, GeonodeStandIn(api_keys=[KEY], latency=0.01) as api:
        settings = (f"GEONODE_BATCH_MIN_URLS={batch_min_urls}", "GEONODE_BATCH_POLL_INTERVAL=0.2")
        process = crawl(site, api, db, log, *settings)
        assert process.wait(timeout=300) == 0, log.read_text()[-2000:]
        assert recorded(db) == api.counters()["tokens_charged"] == 60
