"""Conditional sitemap requests over months of hourly runs: a child sitemap the
server says is not modified costs no download and keeps its rows, an edited child
is read again, and a settings change reads (and applies) everything again."""

from __future__ import annotations

from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

HOUR = 3600.0


@pytest_twisted.ensureDeferred
async def test_hourly_runs_on_an_unchanged_site_are_304s(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=12, children=3) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(first.changes("new")) == 12
        assert site.counters["sitemap_304"] == 0
        assert "increcrawl/sitemap/not_modified" not in first.stats

        for _ in range(3):  # nothing changed: every child is a 304, nothing goes missing
            clock.advance(HOUR)
            quiet = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert quiet.stats["increcrawl/sitemap/not_modified"] == 3
            assert quiet.stats["increcrawl/sitemap/unchanged"] == 3
            assert "increcrawl/missing" not in quiet.stats
            assert quiet.items == []
        assert site.counters["sitemap_304"] == 9

        site.edit(1)  # one child changes (page 1's lastmod moves)
        clock.advance(HOUR)
        edited = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert edited.stats["increcrawl/sitemap/not_modified"] == 2
        assert edited.changes("changed") == {site.page_url(1)}

        site.drop_from_sitemap(5)  # absence is still noticed through a changed child
        for _ in range(3):
            clock.advance(HOUR)
            last = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert last.stats.get("increcrawl/missing_due") == 1
        assert site.fetched["/page/5"] == 2  # the confirming fetch


@pytest_twisted.ensureDeferred
async def test_a_settings_change_sends_no_validators(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=12, children=3) as site:
        db = str(tmp_path / "s.sqlite")
        await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
        clock.advance(HOUR)
        changed = crawl_settings(db, clock, INCRECRAWL_STRIP_TRAILING_SLASH=False)
        before = site.counters["sitemap_304"]
        reread = await run_crawl(changed, sitemap_url=site.sitemap_url)
        assert site.counters["sitemap_304"] == before
        assert "increcrawl/sitemap/not_modified" not in reread.stats
        assert reread.stats["increcrawl/discovered"] >= 12  # applied again, whole
        clock.advance(HOUR)
        again = await run_crawl(changed, sitemap_url=site.sitemap_url)
        assert again.stats["increcrawl/sitemap/not_modified"] == 3
