"""API and network faults during whole crawls: the crawl ends on its own, what was
fetched is recorded, what was not stays due with its old state."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.geonode.breaker import FAILURES_TO_OPEN, PROBES
from increcrawl_scrapy.spiders.incremental import IncrementalSpider
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from increcrawl_scrapy.testing.api_shapes import EXTRACTION_ERRORS
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


@pytest.mark.parametrize("code", sorted(EXTRACTION_ERRORS))
@pytest_twisted.ensureDeferred
async def test_extraction_errors(servers, tmp_path: Path, clock: Clock, code: str) -> None:
    site, api = servers
    api.inject(code, count=3)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(
        crawl_settings(db, clock, api, GEONODE_MAX_RETRIES=5), sitemap_url=site.sitemap_url
    )
    assert result.reason == "finished"
    if EXTRACTION_ERRORS[code]:  # retryable: every page gets there
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
    # The timeout is only for the stalled run: a busy machine takes longer than 0.5 s
    # to finish a healthy job (CI failed that way).
    settings["GEONODE_BATCH_TIMEOUT"] = 3_600.0
    again = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert again.stats.get("increcrawl/batch/timeouts", 0) == 0
    assert again.changes("new") == set(site.page_urls())


@pytest_twisted.ensureDeferred
async def test_the_api_stopped_mid_crawl(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=40) as site:
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
        # The circuit breaker: FAILURES_TO_OPEN failures in a row, then PROBES probes,
        # then the run ends; not 3 attempts for each of the 37 pages left.
        assert stats["finish_reason"] == "geonode_unreachable"
        failed_calls = stats["geonode/errors/transport"]
        assert failed_calls <= FAILURES_TO_OPEN + PROBES + 1, failed_calls
        assert 3 <= len(recorded) < 10
        assert unfetched(db) == 40 - len(recorded)  # every unfetched page stays due
        with StateStore(db) as store:
            assert all(store.get(url).fetch_count == 1 for url in recorded)


@pytest_twisted.ensureDeferred
async def test_answers_that_break_the_contract(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    for kind in ("not_json", "missing_fields", "wrong_types"):
        api.inject(kind)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(crawl_settings(db, clock, api), sitemap_url=site.sitemap_url)
    assert result.reason == "finished" and len(result.changes("new")) == 9
    assert result.stats["geonode/errors/bad_answer"] == 3
    warned = [line for line in result.log if line.startswith("WARNING")]
    assert sum("not the documented JSON" in line for line in warned) == 3
    assert unfetched(db) == 3


@pytest.mark.parametrize("mode", ["repeat", "skip"])
@pytest_twisted.ensureDeferred
async def test_batch_pages_that_repeat_or_skip_items(
    tmp_path: Path, clock: Clock, mode: str
) -> None:
    with SampleSite(pages=120) as site, GeonodeStandIn(api_keys=[KEY], batch_pages=mode) as api:
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=5)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert result.reason == "finished"
        recorded = result.changes("new")
        assert len(result.items) == len(recorded)  # never twice
        if mode == "repeat":
            assert len(recorded) == 120 and result.stats["increcrawl/batch/repeated_results"] > 0
        else:
            assert result.stats["increcrawl/batch/missing_results"] == 120 - len(recorded) > 0
            assert unfetched(db) == 120 - len(recorded)


def forget_the_job_once_made(api: GeonodeStandIn) -> None:
    """Clear the stand-in's jobs once the crawl made one (a fixed delay raced the crawl
    on a loaded machine: jobs cleared before it made its own, which then stalled for ever)."""

    def forget() -> None:
        deadline = time.monotonic() + 60  # a bound on a hang: the crawl makes it at once
        while not api._jobs and time.monotonic() < deadline:
            time.sleep(0.01)
        with api._lock:
            api._jobs.clear()

    threading.Thread(target=forget, daemon=True).start()


@pytest_twisted.ensureDeferred
async def test_a_batch_job_the_api_forgets(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    api.configure(batch_stall=True)
    forget_the_job_once_made(api)  # its id becomes unknown to the API
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=5)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.reason == "finished" and result.items == []
    assert result.stats["increcrawl/batch/errors"] == 1
    assert unfetched(db) == 12


@pytest_twisted.ensureDeferred
async def test_map_answers_off_the_site_are_not_followed(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.configure(
        map_extra_links=[
            "https://evil.example/steal",
            "file:///etc/passwd",
            "http://127.0.0.2/elsewhere",
        ]
    )
    site.hide_sitemaps()
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(crawl_settings(db, clock, api), site_url=f"{site.url}/")
    assert result.stats["increcrawl/map/skipped/offsite"] == 2
    assert result.stats["increcrawl/map/skipped/bad_scheme"] == 1
    assert all(item["url"].startswith(site.url + "/") for item in result.items)
    bodies = [entry["body"] for entry in api.counters()["bodies"] if "url" in entry["body"]]
    assert all(body["url"].startswith(site.url + "/") for body in bodies)


@pytest_twisted.ensureDeferred
async def test_random_faults_converge_to_the_fault_free_state(tmp_path: Path, clock: Clock) -> None:
    def final_state(db: str) -> dict[str, tuple]:
        with StateStore(db) as store:
            rows = store.database.execute("SELECT normalized_url, content_hash, gone FROM pages")
            return {url: (digest, gone) for url, digest, gone in rows}

    with SampleSite(pages=500) as site, GeonodeStandIn(api_keys=[KEY], concurrency_limit=50) as api:
        site.delete(7, status=410)
        clean = str(tmp_path / "clean.sqlite")
        await run_crawl(
            crawl_settings(clean, clock, api, GEONODE_CONCURRENCY=8), sitemap_url=site.sitemap_url
        )
        api.random_faults(
            0.2,
            kinds=("500", "503", "502", "429", "drop", "TIMEOUT", "CAPTCHA_CHALLENGE", "not_json"),
            seed=3,
        )
        faulty = str(tmp_path / "faulty.sqlite")
        settings = crawl_settings(faulty, clock, api, GEONODE_CONCURRENCY=8, GEONODE_MAX_RETRIES=1)
        runs = 0
        while runs < 15:
            runs += 1
            await run_crawl(settings, sitemap_url=site.sitemap_url)
            clock.advance(86_400)  # pages the site failed (TIMEOUT, CAPTCHA) back off
            if unfetched(faulty) == 0:
                break
        assert runs > 1  # the faults did bite
        assert final_state(faulty) == final_state(clean)


@pytest_twisted.ensureDeferred
async def test_an_api_refusing_at_start_ends_the_run_without_waiting_out_the_breaker(
    tmp_path: Path, clock: Clock
) -> None:
    """Every call refused on the crawl's first calls: the run ends at once. Calls already
    queued behind the breaker's pause (GEONODE_BACKOFF_MAX, 300 s here) fail with the run's
    reason instead of waiting it out one by one (CI: a 120 s hang under load)."""
    with socket.socket() as probe, SampleSite(pages=30) as site:
        probe.bind(("127.0.0.1", 0))  # bound, not listening: refused
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, GEONODE_CONCURRENCY=4, GEONODE_BACKOFF_MAX=300)
        settings.update(
            INCRECRAWL_FETCHER="geonode",
            GEONODE_API_URL=f"http://127.0.0.1:{probe.getsockname()[1]}",
            GEONODE_API_KEY=KEY,
            GEONODE_BATCH_MIN_URLS=50,
            # Every page's request reaches the middleware before the first call fails.
            CONCURRENT_REQUESTS=32,
            CONCURRENT_REQUESTS_PER_DOMAIN=32,
        )
        started = time.monotonic()
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        took = time.monotonic() - started
    assert result.reason == "geonode_unreachable"
    assert took < 120, took  # a bound on a hang (the pause is 300 s), not a speed
    assert not result.items
    assert unfetched(db) == 30
