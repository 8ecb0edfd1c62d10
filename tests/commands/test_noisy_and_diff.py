"""Kept content, ``scrapy increcrawl diff`` and ``scrapy increcrawl noisy`` over a
months-long story: a page whose counter the volatile rules do not know is reported
changed on every fetch until the pattern ``noisy`` proposes is set; from then on it
is not, not even once (its fingerprint is taken again from the kept text)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import CrawlResult, crawl_settings, run_crawl
from tests.support.process import run_process

DAY = 86_400.0
NOISY, EDITED, QUIET = 2, 6, 5  # plain, plain and last_modified pages


def increcrawl(db: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, db.parent)


async def crawl(db: Path, site: SampleSite, clock: Clock, **extra) -> CrawlResult:
    clock.advance(40 * DAY)  # past the adaptive rule's 30-day ceiling: every page due
    settings = crawl_settings(
        str(db), clock, INCRECRAWL_POLICY="adaptive", INCRECRAWL_KEEP_CONTENT=True, **extra
    )
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.reason == "finished", result.log[-20:]
    assert result.stats["increcrawl/due"] == 8
    return result


@pytest_twisted.ensureDeferred
async def test_noisy_page_found_diffed_and_quietened(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=8) as site:
        site.add_noise(NOISY, "Readers online now: {n}")
        await crawl(db, site, clock)
        site.edit(EDITED, "A real edit of page six")
        second = await crawl(db, site, clock)
        assert second.changes("changed") == {site.page_url(NOISY), site.page_url(EDITED)}
        for _ in range(2):
            again = await crawl(db, site, clock)
            assert again.changes("changed") == {site.page_url(NOISY)}

        # diff: the last change of the edited page, though fetched unchanged since.
        shown = increcrawl(db, "diff", site.page_url(EDITED) + "?utm_source=x")
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert f"--- {site.page_url(EDITED)}?utm_source=x (before)" in shown.stdout
        assert "\n+A real edit of page six\n" in shown.stdout
        assert "\n-" + site.text(EDITED).split()[0] not in shown.stdout  # old text went
        removed = [
            line
            for line in shown.stdout.splitlines()
            if line.startswith("-") and not line.startswith("---")
        ]
        assert removed and "real edit" not in removed[0]
        quiet = increcrawl(db, "diff", site.page_url(QUIET))
        assert (
            quiet.returncode == 0
            and "has not changed since its text was first kept" in quiet.stdout
        )
        unknown = increcrawl(db, "diff", site.url + "/page/999")
        assert unknown.returncode == 1 and "No page" in unknown.stdout

        # noisy: only the page changed on three fetches in a row, with why.
        listed = increcrawl(db, "noisy", "--min-streak", "3")
        assert listed.returncode == 0, listed.stdout + listed.stderr
        assert site.page_url(NOISY) in listed.stdout and site.page_url(EDITED) not in listed.stdout
        assert "changed 3 fetches in a row" in listed.stdout
        assert "  - Readers online now: " in listed.stdout
        assert "  + Readers online now: " in listed.stdout
        report = json.loads(increcrawl(db, "noisy", "--min-streak", "3", "--json").stdout)
        assert [page["url"] for page in report["pages"]] == [site.page_url(NOISY)]
        assert report["pages_made_equal"] == 1
        patterns = report["proposed_patterns"]
        assert patterns and all("Readers" in pattern for pattern in patterns)
        assert increcrawl(db, "noisy", "--min-streak", "5").stdout.startswith("No page changed")
        assert increcrawl(db, "noisy", "--min-streak", "1").returncode == 2
        unknown = increcrawl(db, "noisy", "--seed", "http://nowhere.example/sitemap.xml")
        assert unknown.returncode == 1 and "No pages of seed" in unknown.stdout

        # The proposal, once set, stops the false changes from the very next run on;
        # a real edit is still seen.
        site.edit(EDITED, "A second real edit")
        for run in range(2):
            quietened = await crawl(db, site, clock, INCRECRAWL_VOLATILE_PATTERNS=patterns)
            expected = {site.page_url(EDITED)} if run == 0 else set()
            assert quietened.changes("changed") == expected
        assert increcrawl(db, "noisy", "--min-streak", "2").stdout.startswith("No page changed")


@pytest_twisted.ensureDeferred
async def test_content_is_kept_only_when_asked(tmp_path: Path, clock: Clock) -> None:
    db = tmp_path / "state.sqlite"
    with SampleSite(pages=8) as site:
        clock.advance(DAY)
        settings = crawl_settings(str(db), clock)
        assert (await run_crawl(settings, sitemap_url=site.sitemap_url)).reason == "finished"
        kept = sqlite3.connect(db).execute("SELECT count(*) FROM contents").fetchone()[0]
        assert kept == 0
        shown = increcrawl(db, "diff", site.page_url(1))
        assert shown.returncode == 1 and "INCRECRAWL_KEEP_CONTENT=True" in shown.stdout
        # Turned on for known pages: kept from their next fetch that brings a text,
        # unchanged or not (a 304 to the ETag and Last-Modified pages brings none).
        await crawl(db, site, clock)
        kept = sqlite3.connect(db).execute("SELECT count(*) FROM contents").fetchone()[0]
        assert kept == sum(SampleSite.kind(i) in ("plain", "volatile") for i in range(8))
    missing = increcrawl(tmp_path / "none.sqlite", "diff", "http://127.0.0.1/x")
    assert missing.returncode == 1 and "No state database" in missing.stdout
