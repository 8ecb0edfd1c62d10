"""A progress line every INCRECRAWL_PROGRESS_INTERVAL seconds while pages are fetched."""

from __future__ import annotations

import re
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl


@pytest_twisted.ensureDeferred
async def test_progress_lines_while_fetching(tmp_path: Path, clock: Clock) -> None:
    with (
        SampleSite(pages=20) as site,
        GeonodeStandIn(api_keys=[KEY], latency=0.15) as api,
    ):
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"),
            clock,
            api,
            GEONODE_CONCURRENCY=2,
            GEONODE_BATCH_MIN_URLS=100,
            INCRECRAWL_PROGRESS_INTERVAL=0.2,
        )
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    lines = [line for line in result.log if "Progress: fetching" in line]
    assert len(lines) >= 3
    done = [int(re.search(r"(\d+) of 20 due pages done", line)[1]) for line in lines]
    assert done == sorted(done) and 0 < done[-1] <= 20
    assert any("pages/s), about" in line and "s left" in line for line in lines)


@pytest_twisted.ensureDeferred
async def test_no_progress_lines_when_off(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=5) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, INCRECRAWL_PROGRESS_INTERVAL=0)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert not any("Progress:" in line for line in result.log)
