"""How `scrapy crawl incremental` ends, as cron reads it: an exit code and a
``finish_reason`` for each way a run can fail, one line for bad input, and the
run summary a good run ends with."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.support.process import crawl_command, run_process

KEY = "exit-key-0123456789"


def crawl(
    db: Path, sitemap: str, *settings: str, key: str | None = None, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess:
    command = crawl_command(sitemap, db, *settings) + [part for arg in args for part in ("-a", arg)]
    return run_process(command, db.parent, key)


def test_a_good_run_exits_0_with_a_summary(tmp_path: Path) -> None:
    with SampleSite(pages=12) as site:
        done = crawl(tmp_path / "s.sqlite", site.sitemap_url, "INCRECRAWL_FETCHER=direct")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Run summary for " in done.stderr
    assert "ended finished (exit code 0" in done.stderr
    assert "12 fetched: 12 new, 0 changed, 0 unchanged, 0 gone, 0 errors" in done.stderr


@pytest.mark.parametrize(
    "answer", [("404", b"gone"), ("200", b"<html><body>Not a sitemap</body></html>")]
)
def test_discovery_that_reads_nothing_exits_3(tmp_path: Path, answer: tuple) -> None:
    status, body = answer
    with SampleSite(pages=3) as site:
        if status == "404":
            site.fail_path("/sitemap.xml", 404)
            url = site.sitemap_url
        else:
            url = site.serve("/html-sitemap.xml", body, "text/html")
        done = crawl(tmp_path / "s.sqlite", url, "INCRECRAWL_FETCHER=direct")
    assert done.returncode == 3, done.stderr[-2000:]
    assert "'finish_reason': 'discovery_failed'" in done.stderr
    assert "No discovery source could be read" in done.stderr


def test_an_unreachable_sitemap_host_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    """Its exit code and summary were right; Scrapy's robots.txt middleware put two
    chained tracebacks in the log for an expected failure (#53, 4)."""
    from tests.support.ports import free_port

    url = f"http://127.0.0.1:{free_port()}/sitemap.xml"  # nothing listens there
    done = crawl(tmp_path / "s.sqlite", url, "INCRECRAWL_FETCHER=direct", "RETRY_TIMES=0")
    assert done.returncode == 3, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    assert "Connection was refused" in done.stderr  # said, in one line


def test_a_bad_key_exits_4(tmp_path: Path) -> None:
    with SampleSite(pages=3) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        done = crawl(
            tmp_path / "s.sqlite", site.sitemap_url, f"GEONODE_API_URL={api.url}", key="wrong-key"
        )
    assert done.returncode == 4, done.stderr[-2000:]
    assert "'finish_reason': 'geonode_bad_key'" in done.stderr


def test_too_many_failed_fetches_exit_6(tmp_path: Path) -> None:
    with SampleSite(pages=12) as site:
        for page in range(10):
            site.fail(page, 500)
        done = crawl(
            tmp_path / "s.sqlite", site.sitemap_url, "INCRECRAWL_FETCHER=direct", "RETRY_TIMES=0"
        )
    assert done.returncode == 6, done.stderr[-2000:]
    assert "'finish_reason': 'too_many_errors'" in done.stderr
    assert "10 of 12 fetches failed" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sitemap_url=not a url",), "-a sitemap_url: not a URL to crawl"),
        (("sitemap_url=ftp://example.com/s.xml",), "-a sitemap_url: not a URL to crawl"),
        (("feed_url=javascript:alert(1)",), "-a feed_url: not a URL to crawl"),
    ],
)
def test_bad_arguments_stop_with_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    command = crawl_command("", tmp_path / "s.sqlite", "INCRECRAWL_FETCHER=direct")
    command = [part for part in command if part != "sitemap_url="]
    command.remove("-a")
    for arg in args:
        command += ["-a", arg]
    done = run_process(command, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error: " in line]
    assert len(errors) == 1 and message in errors[0]
    assert "Spider opened" not in done.stderr  # stopped before anything started


def test_a_misspelled_setting_gets_the_closest_name(tmp_path: Path) -> None:
    with SampleSite(pages=2) as site:
        done = crawl(
            tmp_path / "s.sqlite",
            site.sitemap_url,
            "INCRECRAWL_FETCHER=direct",
            "INCRECRAWL_MAX_FETCH=5",
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        "Unknown setting INCRECRAWL_MAX_FETCH is ignored; did you mean INCRECRAWL_MAX_FETCHES?"
        in done.stderr
    )


def test_an_api_that_goes_down_during_the_run_exits_5(tmp_path: Path) -> None:
    """Reachable at start, then failing every extract: the breaker ends the run (an
    API refusing its first call ends it at once: test_cron_failures.py)."""
    with SampleSite(pages=30) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        api.inject("503", count=100_000, endpoint="extract")
        done = crawl(
            tmp_path / "s.sqlite",
            site.sitemap_url,
            f"GEONODE_API_URL={api.url}",
            "GEONODE_BACKOFF_BASE=0.01",
            "GEONODE_BACKOFF_MAX=0.1",
            key=KEY,
        )
    assert done.returncode == 5, done.stderr[-2000:]
    assert "'finish_reason': 'geonode_unreachable'" in done.stderr
    opened = [line for line in done.stderr.splitlines() if "failed 10 times in a row" in line]
    assert len(opened) == 2  # the warning, and once more in the run summary
    assert "WARNING: The Geonode API failed 10 times in a row" in opened[1]
