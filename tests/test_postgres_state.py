"""State on PostgreSQL: the schema mirrors SQLite's, and ``scrapy increcrawl
migrate`` copies a real crawl's state there and back, checked, so that a crawl on
the copy goes on as it would have on the original. Against a real PostgreSQL
server started for the session (skipped where none is installed; required in CI)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.state import SCHEMA_VERSION, StateStore, pg_schema
from increcrawl_scrapy.state.migrate import TABLES
from increcrawl_scrapy.testing import SampleSite
from increcrawl_scrapy.testing.process import run_process
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

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


def test_a_crawl_is_told_its_state_stays_in_sqlite_for_now() -> None:
    from scrapy.settings import Settings

    dsn = "postgresql://crawler:s3cret@127.0.0.1:5432/state"
    with pytest.raises(ConfigError) as raised:
        IncrecrawlConfig.from_settings(Settings({"INCRECRAWL_DB": dsn}))
    message = str(raised.value)
    assert "scrapy increcrawl migrate" in message and "s3cret" not in message
