"""State on PostgreSQL: the schema mirrors SQLite's, and ``scrapy increcrawl
migrate`` copies a real crawl's state there and back, checked, so that a crawl on
the copy goes on as it would have on the original. Against a real PostgreSQL
server started for the session (skipped where none is installed; required in CI)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.config import DEFAULT_TRACKING_PARAMS
from increcrawl_scrapy.state import SCHEMA_VERSION, StateStore
from increcrawl_scrapy.state.migrate import TABLES
from increcrawl_scrapy.state.postgres import schema as pg_schema
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.support.process import run_process

DAY = 86_400.0


def migrate(cwd: Path, source: str, target: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", "increcrawl", "migrate"]
    return run_process([*command, "--from", source, "--to", target], cwd)


def tables(path: Path) -> dict[str, list[tuple]]:
    db = sqlite3.connect(path)
    try:
        return {table: sorted(db.execute(f"SELECT * FROM {table}")) for table in TABLES}
    finally:
        db.close()


def test_the_postgresql_schema_has_every_sqlite_column(postgres_dsn: str, tmp_path) -> None:
    import psycopg

    StateStore(tmp_path / "s.sqlite").close()
    lite = sqlite3.connect(tmp_path / "s.sqlite")
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        assert pg_schema.migrate(connection) == 0
        assert pg_schema.migrate(connection) == pg_schema.SCHEMA_VERSION
        assert pg_schema.SQLITE_VERSION == SCHEMA_VERSION
        for table in TABLES:
            theirs = [
                row[0]
                for row in connection.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_name = %s ORDER BY ordinal_position",
                    (table,),
                )
            ]
            ours = [row[1] for row in lite.execute(f"PRAGMA table_info({table})")]
            assert theirs == ours, table
    lite.close()


@pytest_twisted.ensureDeferred
async def test_a_crawl_state_goes_to_postgresql_and_back_and_the_crawl_goes_on(
    postgres_dsn: str, tmp_path: Path, clock: Clock
) -> None:
    original, back = tmp_path / "original.sqlite", tmp_path / "back.sqlite"
    with SampleSite(pages=30) as site:
        settings = crawl_settings(str(original), clock, INCRECRAWL_KEEP_CONTENT=True)
        await run_crawl(settings, sitemap_url=site.sitemap_url)
        clock.advance(3 * DAY)
        site.edit(3, text="A new paragraph, so that there is a change and a kept text.")
        site.delete(7)
        await run_crawl(settings, sitemap_url=site.sitemap_url)

        there = migrate(tmp_path, str(original), postgres_dsn)
        assert there.returncode == 0, there.stdout + there.stderr
        assert "Verified" in there.stdout and "pages" in there.stdout
        assert "30 rows ->         30" in there.stdout.replace(",", "")
        home = migrate(tmp_path, postgres_dsn, str(back))
        assert home.returncode == 0, home.stdout + home.stderr
        # Every row of every table, every column, as it was (times to the bit).
        assert tables(back) == tables(original)
        assert tables(original)["contents"] and tables(original)["runs"]

        # The next run on the copy is the run the original would have had.
        clock.advance(10 * DAY)
        site.edit(5, text="Another edit after the move.")
        results = []
        for db in (original, back):
            site.reset_counters()
            copy = crawl_settings(str(db), clock, INCRECRAWL_KEEP_CONTENT=True)
            result = await run_crawl(copy, sitemap_url=site.sitemap_url)
            results.append((result.changes("changed"), dict(site.fetched)))
        assert results[0] == results[1]
        assert site.page_url(5) in results[0][0]


def test_migrate_refuses_a_target_that_holds_a_state(postgres_dsn: str, tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    store = StateStore(db)
    store.start_run("https://example.com/sitemap.xml").upsert([("https://example.com/a", None)])
    store.close()
    assert migrate(tmp_path, str(db), postgres_dsn).returncode == 0
    again = migrate(tmp_path, str(db), postgres_dsn)
    assert again.returncode == 1
    assert "already holds a state (1 rows in pages)" in again.stdout
    exists = migrate(tmp_path, postgres_dsn, str(db))
    assert exists.returncode == 1 and "exists: migrate into a new file" in exists.stdout


def test_migrate_names_what_is_missing(postgres_server, postgres_dsn: str, tmp_path) -> None:
    missing = migrate(tmp_path, str(tmp_path / "none.sqlite"), postgres_dsn)
    assert missing.returncode == 1 and "no state database at" in missing.stdout
    empty = migrate(tmp_path, postgres_dsn, str(tmp_path / "new.sqlite"))
    assert empty.returncode == 1 and "no increcrawl state in" in empty.stdout
    usage = run_process([sys.executable, "-m", "scrapy", "increcrawl", "migrate"], tmp_path)
    assert usage.returncode == 2 and "--from SOURCE and --to TARGET" in usage.stdout


@pytest_twisted.ensureDeferred
async def test_a_crawl_on_postgresql_behaves_as_on_sqlite(
    postgres_dsn: str, tmp_path: Path, clock: Clock
) -> None:
    seen = {}
    for backend, db in (("sqlite", str(tmp_path / "s.sqlite")), ("postgresql", postgres_dsn)):
        run_clock = Clock(clock.now)
        with SampleSite(pages=25) as site:
            settings = crawl_settings(db, run_clock)
            first = await run_crawl(settings, sitemap_url=site.sitemap_url)
            run_clock.advance(3 * DAY)
            site.edit(4, text="An edit between the runs.")
            site.delete(9)
            site.reset_counters()
            second = await run_crawl(settings, sitemap_url=site.sitemap_url)
            paths = lambda urls: {url.replace(site.url, "") for url in urls}  # noqa: E731
            seen[backend] = (
                paths(first.changes("new")),
                paths(second.changes("changed")),
                paths(second.changes("gone")),
                dict(site.fetched),
                second.stats.get("increcrawl/due"),
            )
            assert first.reason == second.reason == "finished"
    assert seen["postgresql"] == seen["sqlite"]
    assert len(seen["sqlite"][0]) == 25 and seen["sqlite"][1]


@pytest_twisted.ensureDeferred
async def test_two_crawls_share_a_postgresql_state_without_fetching_a_page_twice(
    postgres_dsn: str, clock: Clock, monkeypatch
) -> None:
    from twisted.internet import defer

    from increcrawl_scrapy.spiders.incremental import IncrementalSpider

    monkeypatch.setattr(IncrementalSpider, "queue_chunk", 4)  # many small claims
    with SampleSite(pages=40) as site:
        settings = crawl_settings(postgres_dsn, clock, CONCURRENT_REQUESTS=2)
        await run_crawl(settings, sitemap_url=site.sitemap_url)
        clock.advance(40 * DAY)  # every page due again
        site.reset_counters()
        both = await defer.gatherResults(
            [
                defer.ensureDeferred(run_crawl(settings, sitemap_url=site.sitemap_url))
                for _ in range(2)
            ]
        )
    assert {path: n for path, n in site.fetched.items() if n != 1} == {}
    assert len(site.fetched) == 40
    done = [result.stats.get("increcrawl/unchanged", 0) for result in both]
    assert sum(done) == 40 and all(done), done  # both took part
    assert sum(r.stats.get("increcrawl/discovery_by_another_worker", 0) for r in both) == 1
    assert all(result.reason == "finished" for result in both)


def test_a_killed_workers_pages_are_fetched_by_another_once_its_leases_expire(
    postgres_dsn: str, tmp_path: Path
) -> None:
    import os
    import signal
    import time

    import psycopg

    from tests.support.process import crawl_command, crawl_env

    lease = 4.0
    slow = (
        "INCRECRAWL_FETCHER=direct",
        "TELNETCONSOLE_ENABLED=False",
        f"INCRECRAWL_LEASE_SECONDS={lease}",
    )
    with SampleSite(pages=60) as site:
        first = run_process(crawl_command(site.sitemap_url, postgres_dsn, *slow), tmp_path)
        assert first.returncode == 0, first.stderr[-2000:]
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            connection.execute("UPDATE pages SET next_check = 0")
        site.reset_counters()
        doomed = subprocess.Popen(
            crawl_command(site.sitemap_url, postgres_dsn, *slow, "DOWNLOAD_DELAY=0.2"),
            cwd=tmp_path,
            env=crawl_env(None),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while sum(site.fetched.values()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(doomed.pid, signal.SIGKILL)  # mid-run, holding leases, results unwritten
        doomed.wait(timeout=30)
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            expiry = dict(connection.execute("SELECT normalized_url, expires_at FROM leases"))
        held = set(expiry)
        assert held  # the dead worker's leases outlive its connection
        survivor = run_process(crawl_command(site.sitemap_url, postgres_dsn, *slow), tmp_path)
        assert survivor.returncode == 0, survivor.stderr[-2000:]
        with psycopg.connect(postgres_dsn, autocommit=True) as connection:
            unrecorded = connection.execute(
                "SELECT count(*) FROM pages WHERE next_check = 0"
            ).fetchone()[0]
            left = connection.execute("SELECT count(*) FROM leases").fetchone()[0]
            fetched_at = dict(
                connection.execute(
                    "SELECT normalized_url, last_fetched FROM pages WHERE normalized_url = ANY(%s)",
                    (list(held),),
                )
            )
        base = site.url
    assert unrecorded == 0 and left == 0  # every page recorded once the survivor ends
    assert len(site.fetched) == 60
    twice = {path for path, n in site.fetched.items() if n > 1}
    assert {f"{base}{path}" for path in twice} <= held  # only the dead worker's pages
    # The survivor fetched the dead worker's pages only once their leases had expired.
    assert all(fetched_at[key] >= expiry[key] for key in held)


@pytest_twisted.ensureDeferred
async def test_changed_settings_rekey_and_refingerprint_a_postgresql_state(
    postgres_dsn: str, clock: Clock
) -> None:
    with SampleSite(pages=12) as site:
        settings = crawl_settings(postgres_dsn, clock, INCRECRAWL_KEEP_CONTENT=True)
        await run_crawl(settings, sitemap_url=site.sitemap_url)
        clock.advance(3 * DAY)
        # Other normalization settings re-key every row; other volatile rules take
        # fingerprints again from the kept texts: nothing is new, nothing changed.
        changed = dict(
            settings,
            INCRECRAWL_TRACKING_PARAMS=[*DEFAULT_TRACKING_PARAMS, "session"],
            INCRECRAWL_VOLATILE_PATTERNS=[r"Readers online: \d+"],
        )
        result = await run_crawl(changed, sitemap_url=site.sitemap_url)
    assert result.reason == "finished"
    assert not result.changes("new") and not result.changes("changed")
    assert result.stats.get("increcrawl/unchanged", 0) == 12
    assert result.stats.get("increcrawl/rekeyed", 0) == 0  # checked, nothing to move


@pytest_twisted.ensureDeferred
async def test_crawls_on_one_state_share_the_plans_concurrency(
    postgres_dsn: str, clock: Clock, monkeypatch
) -> None:
    from twisted.internet import defer

    from increcrawl_scrapy.spiders.incremental import IncrementalSpider
    from increcrawl_scrapy.testing import GeonodeStandIn
    from tests.crawling import KEY

    monkeypatch.setattr(IncrementalSpider, "queue_chunk", 6)
    with (
        SampleSite(pages=60) as site,
        GeonodeStandIn(api_keys=[KEY], concurrency_limit=2, latency=0.05) as api,
    ):
        # Each crawl may make 2 calls at once; the plan allows 2 in all.
        settings = crawl_settings(
            postgres_dsn, clock, api, GEONODE_CONCURRENCY=2, GEONODE_BATCH_MIN_URLS=10**9
        )
        await run_crawl(settings, sitemap_url=site.sitemap_url)
        clock.advance(40 * DAY)
        api.reset_counters()
        both = await defer.gatherResults(
            [
                defer.ensureDeferred(run_crawl(settings, sitemap_url=site.sitemap_url))
                for _ in range(2)
            ]
        )
        counters = api.counters()
    assert all(result.stats.get("increcrawl/unchanged", 0) for result in both)
    assert sum(result.stats.get("increcrawl/unchanged", 0) for result in both) == 60
    assert counters["peak_concurrency"] <= 2, counters["peak_concurrency"]
    assert counters["statuses"].get("429", 0) == 0
