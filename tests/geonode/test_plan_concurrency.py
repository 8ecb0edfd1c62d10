"""With GEONODE_CONCURRENCY unset, the crawl runs at the plan's work-concurrency
limit (read at start); a 429 WORK_CONCURRENCY_LIMITED lowers it for the rest of the run."""

from __future__ import annotations

from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl


@pytest_twisted.ensureDeferred
async def test_the_plan_sets_the_concurrency(tmp_path: Path, clock: Clock) -> None:
    with (
        SampleSite(pages=30) as site,
        GeonodeStandIn(api_keys=[KEY], concurrency_limit=5, latency=0.2) as api,
    ):
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"), clock, api, GEONODE_BATCH_MIN_URLS=100
        )
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        counters = api.counters()
    assert len(result.changes("new")) == 30
    assert any("GEONODE_CONCURRENCY from the plan: 5 calls at once" in line for line in result.log)
    assert counters["peak_concurrency"] == 5  # not the default of 2
    assert counters["requests"]["GET /v1/usage/concurrency"] == 1


@pytest_twisted.ensureDeferred
async def test_a_setting_wins_and_429s_lower_it(tmp_path: Path, clock: Clock) -> None:
    with (
        SampleSite(pages=30) as site,
        GeonodeStandIn(api_keys=[KEY], concurrency_limit=3, latency=0.2) as api,
    ):
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"),
            clock,
            api,
            GEONODE_CONCURRENCY=6,
            GEONODE_BATCH_MIN_URLS=100,
        )
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        counters = api.counters()
    assert len(result.changes("new")) == 30  # the refused calls were retried
    assert "GET /v1/usage/concurrency" not in counters["requests"]
    lowered = [
        line
        for line in result.log
        if line.startswith("WARNING") and "calls at once from now on" in line
    ]
    assert lowered and int(lowered[-1].split(": ")[1].split()[0]) <= 5  # from 6, lowered
    assert counters["peak_concurrency"] <= 3
