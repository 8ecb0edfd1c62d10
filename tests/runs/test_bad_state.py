"""Bad settings and bad state stop `scrapy crawl incremental` with a clear message."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.support.process import crawl_command, crawl_env

KEY = "state-key-0123456789"


def crawl(
    db: Path, *extra: str, sitemap: str = "http://127.0.0.1:9/sitemap.xml", wait: bool = True
) -> subprocess.CompletedProcess | subprocess.Popen:
    command = crawl_command(sitemap, db) + list(extra)
    if not wait:
        return subprocess.Popen(
            command,
            env=crawl_env(KEY),
            cwd=db.parent,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    return subprocess.run(
        command,
        env=crawl_env(KEY),
        cwd=db.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("INCRECRAWL_MIN_INTERVAL", "-5"),
        ("INCRECRAWL_CHANGE_FACTOR", "1.5"),
        ("INCRECRAWL_FETCHER", "curl"),
        ("GEONODE_CONCURRENCY", "zero"),
        ("INCRECRAWL_VOLATILE_PATTERNS", "(unclosed"),
    ],
)
def test_a_bad_setting_stops_the_crawl_with_one_line(
    tmp_path: Path, setting: str, value: str
) -> None:
    done = crawl(tmp_path / "s.sqlite", "-s", f"{setting}={value}")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error: bad setting" in line]
    assert len(errors) == 1 and f"{setting}='{value}'" in errors[0]
    assert not (tmp_path / "s.sqlite").exists()


def test_a_corrupt_database_stops_the_crawl_and_is_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    db.write_bytes(b"not a database at all\n" * 100)
    before = db.read_bytes()
    with SampleSite(pages=4) as site:
        done = crawl(db, "-s", "INCRECRAWL_FETCHER=direct", sitemap=site.sitemap_url)
    assert done.returncode == 2
    assert "error: " in done.stderr and "is not an increcrawl state database" in done.stderr
    assert db.read_bytes() == before
    assert site.counters["pages"] == 0


def test_a_second_crawl_on_a_database_in_use_stops_with_a_message(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with (
        # Long enough that the first crawl outlasts the second's start on a busy machine.
        SampleSite(pages=60) as site,
        GeonodeStandIn(api_keys=[KEY], latency=0.5, concurrency_limit=1) as api,
    ):
        first = crawl(
            db,
            "-s",
            f"GEONODE_API_URL={api.url}",
            "-s",
            "GEONODE_CONCURRENCY=1",
            "-s",
            "GEONODE_BATCH_MIN_URLS=1000",
            sitemap=site.sitemap_url,
            wait=False,
        )
        try:
            deadline = time.monotonic() + 60
            while api.counters()["requests"].get("POST /v1/extract", 0) < 2:
                assert time.monotonic() < deadline and first.poll() is None
                time.sleep(0.05)
            second = crawl(db, "-s", f"GEONODE_API_URL={api.url}", sitemap=site.sitemap_url)
            assert second.returncode == 75, second.stderr  # EX_TEMPFAIL: cron's "try later"
            assert "is in use by another crawl (pid" in second.stderr
            assert "Traceback" not in second.stderr
            assert first.poll() is None  # the first crawl goes on undisturbed
        finally:
            first.terminate()
            first.communicate(timeout=60)
