"""API and network faults during whole crawls: the crawl ends on its own, what was
fetched is recorded, what was not stays due with its old state."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.spiders.incremental import IncrementalSpider
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl


@pytest.fixture
def servers():
    with SampleSite(pages=12) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        yield site, api


def unfetched(db: str) -> int:
    with StateStore(db) as store:
        return store.count(last_fetched=None)


@pytest_twisted.ensureDeferred
async def test_gateway_errors_and_dropped_connections_are_retried(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    for kind in ("502", "504", "drop", "500"):
        api.inject(kind, count=2)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(crawl_settings(db, clock, api), sitemap_url=site.sitemap_url)
    assert result.reason == "finished"
    assert result.changes("new") == set(site.page_urls())
    assert result.stats["geonode/retries"] >= 8
    assert result.stats["geonode/errors/transport"] >= 2
    assert result.stats["geonode/status/502"] == 2 and result.stats["geonode/status/504"] == 2
    assert unfetched(db) == 0


@pytest_twisted.ensureDeferred
async def test_an_answer_slower_than_the_timeout_is_retried(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.configure(slow_seconds=30)
    api.inject("slow")
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api, GEONODE_TIMEOUT_MS=1000)  # the client waits 6 s
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.changes("new") == set(site.page_urls())
    assert result.stats["geonode/errors/transport"] == 1


@pytest.mark.parametrize("code", ["CAPTCHA_CHALLENGE", "PERMANENT_BLOCK", "TIMEOUT", "PROXY_ERROR"])
@pytest_twisted.ensureDeferred
async def test_extraction_errors(servers, tmp_path: Path, clock: Clock, code: str) -> None:
    site, api = servers
    api.inject(code, count=3)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(
        crawl_settings(db, clock, api, GEONODE_MAX_RETRIES=5), sitemap_url=site.sitemap_url
    )
    assert result.reason == "finished"
    if code in ("TIMEOUT", "PROXY_ERROR"):  # retryable: every page gets there
        assert len(result.changes("new")) == 12 and result.stats["geonode/retries"] == 3
    else:  # not retryable: three pages fail and stay due
        assert len(result.changes("new")) == 9 and result.stats["increcrawl/errors"] == 3
        assert unfetched(db) == 3
        assert "geonode/retries" not in result.stats


@pytest_twisted.ensureDeferred
async def test_a_batch_stuck_in_processing_is_cancelled_and_left_due(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.configure(batch_stall=True)
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=5, GEONODE_BATCH_TIMEOUT=0.5)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.reason == "finished" and result.items == []
    assert result.stats["increcrawl/batch/timeouts"] == 1
    assert api.counters()["requests"]["DELETE /v1/batch/{job_id}"] == 1
    assert unfetched(db) == 12
    api.configure(batch_stall=False)
    again = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert again.changes("new") == set(site.page_urls())


@pytest_twisted.ensureDeferred
async def test_the_api_stopped_mid_crawl(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=12) as site:
        api = GeonodeStandIn(api_keys=[KEY], concurrency_limit=1, latency=0.1).start()
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, api, GEONODE_CONCURRENCY=1, GEONODE_MAX_RETRIES=2)
        crawler = Crawler(IncrementalSpider, Settings(settings))
        recorded: list[str] = []

        def scraped(item: dict) -> None:
            recorded.append(item["url"])
            if len(recorded) == 3:
                threading.Thread(target=api.stop).start()  # the API goes away

        crawler.signals.connect(scraped, signal=signals.item_scraped)
        await crawler.crawl(sitemap_url=site.sitemap_url)
        stats = crawler.stats.get_stats()
        assert stats["finish_reason"] == "finished"
        assert 3 <= len(recorded) < 12
        assert stats["increcrawl/errors"] == 12 - len(recorded)
        assert unfetched(db) == 12 - len(recorded)
        with StateStore(db) as store:
            assert all(store.get(url).fetch_count == 1 for url in recorded)
