"""The operator's commands on a PostgreSQL state, run as an operator runs them: the
same answers as on SQLite for the same crawls, edits applied, passwords never shown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from increcrawl_scrapy.testing import SampleSite
from tests.support.process import crawl_command, run_process


def scrapy(db: str, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, cwd)


def crawl(db: str, site: SampleSite, cwd: Path) -> None:
    settings = ("INCRECRAWL_FETCHER=direct", "INCRECRAWL_KEEP_CONTENT=True")
    done = run_process(crawl_command(site.sitemap_url, db, *settings), cwd)
    assert done.returncode == 0, done.stderr[-3000:]


def status(db: str, cwd: Path) -> dict[str, Any]:
    done = scrapy(db, cwd, "status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    for seed in report["seeds"]:
        for run in seed["runs"]:  # wall-clock times: the crawls ran one after the other
            del run["started_at"], run["finished_at"]
    return report


def test_the_operators_commands_read_and_edit_a_postgresql_state(
    postgres_dsn: str, tmp_path: Path
) -> None:
    states = {"sqlite": str(tmp_path / "state.sqlite"), "postgresql": postgres_dsn}
    with SampleSite(pages=10) as site:
        for db in states.values():
            crawl(db, site, tmp_path)
        site.edit(3, text="An edit the diff shows.")
        for db in states.values():
            done = scrapy(db, tmp_path, "due", "--all")
            assert done.stdout.strip() == "10 pages made due now", done.stdout + done.stderr
            crawl(db, site, tmp_path)
        edited, sitemap = site.page_url(3), site.sitemap_url
    seen = {}
    for name, db in states.items():
        diff = scrapy(db, tmp_path, "diff", edited)
        noisy = scrapy(db, tmp_path, "noisy", "--json")
        report = scrapy(db, tmp_path, "report", "-o", str(tmp_path / f"{name}.html"))
        assert diff.returncode == noisy.returncode == report.returncode == 0, report.stdout
        # The texts differ in their render times: the edit is what both show.
        assert "\n+An edit the diff shows.\n" in diff.stdout
        assert "\n-Page 3 revision 0." in diff.stdout
        seen[name] = (status(db, tmp_path), json.loads(noisy.stdout))
    assert seen["postgresql"] == seen["sqlite"]
    (seed,) = seen["postgresql"][0]["seeds"]
    assert (seed["pages"], seed["live"], seed["runs"][0]["changed"]) == (10, 10, 1)
    html = (tmp_path / "postgresql.html").read_text()
    assert sitemap in html and "127.0.0.1" in html
    # Edits apply at once (no crawl lock on a shared state).
    assert scrapy(postgres_dsn, tmp_path, "forget", edited).stdout.strip() == "1 page forgotten"
    assert status(postgres_dsn, tmp_path)["seeds"][0]["pages"] == 9


def test_a_postgresql_state_that_cannot_be_read_is_one_line_without_its_password(
    postgres_dsn: str, tmp_path: Path
) -> None:
    unreachable = "postgresql://crawler:s3cret@127.0.0.1:9/state"
    done = scrapy(unreachable, tmp_path, "status")
    assert done.returncode == 1
    assert "cannot connect to postgresql://crawler:***@127.0.0.1:9/state" in done.stdout
    assert "s3cret" not in done.stdout + done.stderr
    in_query = "postgresql://crawler@127.0.0.1:9/state?sslmode=disable&password=s3cret"
    for command in (("status",), ("due", "--all"), ("report", "-o", str(tmp_path / "x.html"))):
        done = scrapy(in_query, tmp_path, *command)
        assert done.returncode == 1, command
        assert "s3cret" not in done.stdout + done.stderr, command
        assert "password=***" in done.stdout, command
    empty = postgres_dsn.rsplit("/", 1)[0] + "/postgres"  # a database without a state
    done = scrapy(empty, tmp_path, "report", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 1 and "no increcrawl state in" in done.stdout
