"""``scrapy increcrawl check`` and ``scrapy increcrawl demo``, run as a user runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from increcrawl_scrapy.testing import GeonodeStandIn
from tests.support.process import crawl_env

KEY = "check-key-0123456789"


def scrapy(
    *args: str, key: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "scrapy", *args],
        env=crawl_env(key),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_check_reports_the_plan_concurrency(tmp_path: Path) -> None:
    with GeonodeStandIn(api_keys=[KEY], concurrency_limit=8) as api:
        done = scrapy(
            "increcrawl", "check", "-s", f"GEONODE_API_URL={api.url}", key=KEY, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert "0 in use of 8 allowed" in done.stdout
        assert "GEONODE_CONCURRENCY = 8" in done.stdout
        assert KEY not in done.stdout + done.stderr

        rejected = scrapy(
            "increcrawl",
            "check",
            "-s",
            f"GEONODE_API_URL={api.url}",
            key="wrong-key-123456",
            cwd=tmp_path,
        )
        assert rejected.returncode == 1 and "rejected" in rejected.stdout
        assert "wrong-key-123456" not in rejected.stdout

    missing = scrapy("increcrawl", "check", cwd=tmp_path)
    assert missing.returncode == 1 and "No GEONODE_API_KEY" in missing.stdout


def test_unknown_subcommand_is_a_usage_error(tmp_path: Path) -> None:
    done = scrapy("increcrawl", "frobnicate", cwd=tmp_path)
    assert done.returncode == 2 and "choose one of: check, demo, status, due, forget" in done.stderr


def test_demo_prints_both_change_sets(tmp_path: Path) -> None:
    done = scrapy(
        "increcrawl", "demo", "--dir", str(tmp_path / "demo"), "--pages", "12", cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Run 1: 12 items in the change set (12 new)" in done.stdout
    assert "Run 2: 5 items in the change set (2 changed, 2 gone, 1 new)" in done.stdout
    assert (tmp_path / "demo" / "crawl_state.sqlite").exists()
    assert (tmp_path / "demo" / "run2.jsonl").read_text().count("\n") == 5
    # A newcomer's first screen: no warning about the project's own sample pages,
    # and the API's use in words, not a dict (#53, 4).
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Geonode API calls: 27 (" in done.stdout and "{" not in done.stdout, done.stdout
    # Again into the same folder: its state is another site's, two days ahead; the
    # demo says so and leaves it as it is.
    state = (tmp_path / "demo" / "crawl_state.sqlite").read_bytes()
    again = scrapy(
        "increcrawl", "demo", "--dir", str(tmp_path / "demo"), "--pages", "12", cwd=tmp_path
    )
    assert again.returncode == 2, again.stdout + again.stderr
    assert "already holds a state database" in again.stdout
    assert (tmp_path / "demo" / "crawl_state.sqlite").read_bytes() == state
