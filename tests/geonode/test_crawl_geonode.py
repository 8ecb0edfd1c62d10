"""Whole crawls through the stand-in API: batch and single paths, map discovery,
throttling, failures, fatal errors, and the key kept secret."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.geonode.breaker import FAILURES_TO_OPEN, PROBES
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl


@pytest.fixture
def servers():
    with SampleSite(pages=12) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        yield site, api


def due_urls(db: str, seed: str, clock: Clock) -> set[str]:
    with StateStore(db, clock=clock) as store:
        return {page.url for page in store.due(seed)}


@pytest_twisted.ensureDeferred
async def test_batch_path_above_the_threshold(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, api, GEONODE_BATCH_MIN_URLS=5)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    requests = api.counters()["requests"]
    assert requests.get("POST /v1/batch") == 1 and "POST /v1/extract" not in requests
    assert requests["GET /v1/batch/{job_id}"] >= 3  # polled, then read page by page
    assert result.changes("new") == set(site.page_urls())
    assert {item["fetcher"] for item in result.items} == {"geonode-batch"}
    assert result.stats["geonode/batch/jobs"] == 1
    assert result.stats["geonode/tokens_charged"] == 12


@pytest_twisted.ensureDeferred
async def test_single_extracts_below_the_threshold(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, api, GEONODE_BATCH_MIN_URLS=13)
    await run_crawl(settings, sitemap_url=site.sitemap_url)
    requests = api.counters()["requests"]
    assert requests["POST /v1/extract"] == 12 and "POST /v1/batch" not in requests


@pytest_twisted.ensureDeferred
async def test_failed_batch_items_back_off_then_are_fetched(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.inject("TIMEOUT", count=3, endpoint="batch_item")
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=5)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.changes("new")) == 9
    assert result.stats["increcrawl/errors"] == 3
    assert result.stats["increcrawl/errors/backed_off"] == 3  # the origin timed out
    failed = set(site.page_urls()) - result.changes("new")
    seed = result.items[0]["url"].rsplit("/page", 1)[0] + "/sitemap.xml"
    assert due_urls(db, seed, clock) == set()
    clock.advance(3600)  # INCRECRAWL_MIN_INTERVAL: the first back-off
    assert due_urls(db, seed, clock) == failed
    again = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert again.changes("new") == failed


@pytest_twisted.ensureDeferred
async def test_site_url_discovery_through_map(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    site.hide_sitemaps()  # the map is the fallback for a site without any
    result = await run_crawl(
        crawl_settings(str(tmp_path / "s.sqlite"), clock, api), site_url=f"{site.url}/"
    )
    assert api.counters()["requests"]["POST /v1/map"] == 1
    assert set(site.page_urls()) <= result.changes("new")
    assert result.reason == "finished"


@pytest.mark.parametrize("retry_after", [None, 0.2])
@pytest_twisted.ensureDeferred
async def test_429_bursts_finish_with_every_page_recorded(
    servers, tmp_path: Path, clock: Clock, retry_after: float | None
) -> None:
    site, api = servers
    api.configure(concurrency_limit=2, latency=0.1, retry_after=retry_after)
    settings = crawl_settings(
        str(tmp_path / "s.sqlite"), clock, api, GEONODE_CONCURRENCY=6, GEONODE_MAX_RETRIES=20
    )
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    counters = api.counters()
    assert counters["statuses"].get("429", 0) >= 1
    assert counters["peak_concurrency"] <= 2
    assert result.changes("new") == set(site.page_urls())
    assert result.stats["geonode/retries"] >= 1
    assert result.stats["geonode/retries/backoff_ms"] > 0
    if retry_after:
        # Retry-After is honoured: every wait is exactly what the API asked for.
        assert result.stats["geonode/retries/backoff_ms"] == 200 * result.stats["geonode/retries"]


@pytest_twisted.ensureDeferred
async def test_503_pages_back_off_and_the_rest_is_recorded(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    site.fail(2, 503)
    site.fail(3, 503)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(crawl_settings(db, clock, api), sitemap_url=site.sitemap_url)
    failing = {site.page_url(2), site.page_url(3)}
    assert result.changes("new") == set(site.page_urls()) - failing
    with StateStore(db, clock=clock) as store:
        for url in failing:
            page = store.get(url)
            assert page.last_fetched is None and page.error_count == 1
            # The site failed the page: it backs off, so it cannot starve the others.
            assert page.error_streak == 1 and page.next_check == clock.now + 3600
    assert result.stats["increcrawl/errors"] == 2


@pytest_twisted.ensureDeferred
async def test_api_503_after_retries_leaves_pages_due(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.inject("503", count=1000)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(
        crawl_settings(db, clock, api, GEONODE_MAX_RETRIES=2, GEONODE_CONCURRENCY=2),
        sitemap_url=site.sitemap_url,
    )
    # The API is down: the circuit breaker ends the run (exit code 5) long before
    # every page has spent its 3 attempts (36 requests); the pages stay due.
    assert result.reason == "geonode_unreachable" and result.items == []
    assert api.counters()["requests"]["POST /v1/extract"] <= FAILURES_TO_OPEN + PROBES + 2
    assert result.stats["increcrawl/errors"] == 12
    with StateStore(db, clock=clock) as store:
        assert store.count(last_fetched=None) == 12


@pytest.mark.parametrize(
    ("knobs", "reason"),
    [({"api_keys": ["another"]}, "geonode_bad_key"), ({"quota": 4}, "geonode_quota_exhausted")],
)
@pytest_twisted.ensureDeferred
async def test_fatal_api_errors_close_with_their_reason(
    servers, tmp_path: Path, clock: Clock, knobs: dict, reason: str
) -> None:
    site, api = servers
    api.configure(**knobs)
    db = str(tmp_path / "s.sqlite")
    result = await run_crawl(crawl_settings(db, clock, api), sitemap_url=site.sitemap_url)
    assert result.reason == reason
    recorded = result.changes("new")
    assert len(recorded) == knobs.get("quota", 0)
    # A bad key is found before discovery (the plan's concurrency is read first):
    # nothing to keep due; a spent quota leaves the unfetched pages due.
    unfetched = 0 if reason == "geonode_bad_key" else 12 - len(recorded)
    with StateStore(db, clock=clock) as store:
        assert store.count(last_fetched=None) == unfetched
        assert store.runs()[0]["close_reason"] == reason


@pytest_twisted.ensureDeferred
async def test_the_key_is_in_no_log_line_stat_item_or_database(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    site.fail(2, 503)
    api.inject("TIMEOUT", count=2)
    api.inject("500", count=2)
    db = tmp_path / "s.sqlite"
    result = await run_crawl(crawl_settings(str(db), clock, api), sitemap_url=site.sitemap_url)
    # The key was sent and accepted (the stand-in answers 401 to any other): the
    # crawl fetched its pages through the API and finished normally.
    assert result.reason == "finished" and "geonode/status/401" not in result.stats
    assert result.changes("new") == set(site.page_urls()) - {site.page_url(2)}
    assert any("DEBUG" in line for line in result.log)
    assert KEY not in "\n".join(result.log)
    assert KEY not in repr(result.stats) and KEY not in repr(result.items)
    for path in tmp_path.iterdir():
        assert KEY.encode() not in path.read_bytes()
    # It was sent, in the header only.
    assert KEY not in repr(api.counters()["bodies"])


@pytest_twisted.ensureDeferred
async def test_a_partial_discovery_skips_missing_marking(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api)
    await run_crawl(settings, sitemap_url=site.sitemap_url)
    site.fail_path("/sitemap-2.xml.gz", 500)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.stats["increcrawl/sitemap/errors"] == 1
    assert result.stats["increcrawl/discovery_incomplete"] == 1
    assert any("incomplete" in line for line in result.log if line.startswith("WARNING"))
    with StateStore(db, clock=clock) as store:
        assert store.count(missing_runs=1) == 0
        assert store.runs()[-1]["discovery_complete"] == 0


def test_the_spider_needs_a_seed_argument() -> None:
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider

    with pytest.raises(ValueError, match="-a feed_url=URL, -a robots_url=URL or -a site_url=URL"):
        IncrementalSpider()
    with pytest.raises(ValueError, match="sitemap_url"):
        IncrementalSpider(sitemap_url="not a url")


@pytest_twisted.ensureDeferred
async def test_client_keeps_to_geonode_concurrency(servers, tmp_path: Path, clock: Clock) -> None:
    site, api = servers
    api.configure(concurrency_limit=100, latency=0.2)
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, api, GEONODE_CONCURRENCY=3)
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.changes("new")) == 12
    assert api.counters()["peak_concurrency"] == 3


@pytest_twisted.ensureDeferred
async def test_one_client_bounds_every_api_call_of_the_crawl(tmp_path: Path, clock: Clock) -> None:
    # Extracts (the middleware) and batch polling (the spider) overlap: together
    # they stay within GEONODE_CONCURRENCY, because they share the crawl's client.
    with SampleSite(pages=24) as site, GeonodeStandIn(api_keys=[KEY], latency=0.3) as api:
        db = str(tmp_path / "s.sqlite")
        await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)  # validators
        clock.advance(2 * 86400)
        api.reset_counters()
        settings = crawl_settings(db, clock, api, GEONODE_CONCURRENCY=2, GEONODE_BATCH_MIN_URLS=2)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        counters = api.counters()
    singles = counters["requests"]["POST /v1/extract"]
    polls = counters["requests"]["GET /v1/batch/{job_id}"]
    assert singles >= 6 and polls >= 3 and result.stats["geonode/batch/jobs"] == 1
    assert counters["peak_calls"] == 2  # used to the full, never beyond
