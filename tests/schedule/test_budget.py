"""Fetch budgets: INCRECRAWL_MAX_FETCHES spent where change is likeliest (or on the
longest overdue), INCRECRAWL_MAX_TOKENS stopping the queue before the Geonode
tokens pass it; what is left stays due and is reported."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.schedule.policy import LearnedPolicy
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl

HOUR, DAY = 3600.0, 86400.0
SEED = "https://example.com/sitemap.xml"


def url(name: str) -> str:
    return f"https://example.com/{name}"


def history(store: StateStore, clock: Clock, name: str, changes: list[bool]) -> None:
    """Fetch *name* once a day, changed or not as *changes* says."""
    for version, changed in enumerate(changes):
        store.record(url(name), 200, seed=SEED, content_hash=f"{name}{version if changed else 0}")
        clock.advance(DAY)


@pytest.fixture
def store(tmp_path: Path, clock: Clock):
    with StateStore(tmp_path / "s.sqlite", clock=clock, policy=LearnedPolicy()) as s:
        yield s


def scripted(store: StateStore, clock: Clock) -> None:
    """A page that changes daily, one that never does, both due; a new page; a page
    whose lastmod moved."""
    run = store.start_run(SEED)
    # "fast" has no date: its changes are its own (a date that never moves while the
    # page changes at every fetch would make them noise).
    run.upsert([(url("fast"), None), (url("stable"), "2024-01-01"), (url("moved"), "2024-01-01")])
    run.apply_lastmod()
    run.finish({}, discovery_complete=True)
    start = clock.now
    for name, changed in (("fast", True), ("stable", False), ("moved", False)):
        clock.now = start
        history(store, clock, name, [True] + [changed] * 5)
    clock.now = start + 400 * DAY  # everything is overdue
    run = store.start_run(SEED)
    run.upsert([(url("fast"), None), (url("stable"), "2024-01-01")])
    run.upsert([(url("moved"), "2025-06-01"), (url("new"), None)])
    run.apply_lastmod()
    run.finish({}, discovery_complete=True)


def test_a_budget_takes_new_and_moved_pages_then_the_likeliest_to_have_changed(
    store: StateStore, clock: Clock
) -> None:
    scripted(store, clock)
    assert store.get(url("fast")).change_rate > 10 * store.get(url("stable")).change_rate
    everything = store.budget(SEED, None)
    assert (everything.due, everything.left, everything.chosen) == (4, 0, None)
    budget = store.budget(SEED, 3)
    assert budget.chosen is not None
    assert set(budget.chosen[:2]) == {url("new"), url("moved")}
    assert budget.chosen[2] == url("fast")
    assert budget.left == 1
    stable = store.get(url("stable"))
    assert budget.longest_wait == pytest.approx(clock.now - stable.next_check)
    assert [page.normalized_url for page in store.due(SEED, 3)] == budget.chosen


def test_the_oldest_first_order_is_the_queue_order(tmp_path: Path, clock: Clock) -> None:
    with StateStore(
        tmp_path / "s.sqlite", clock=clock, policy=LearnedPolicy(), budget_order="oldest"
    ) as store:
        scripted(store, clock)
        queue = [page.normalized_url for page in store.due(SEED)]
        assert [page.normalized_url for page in store.due(SEED, 2)] == queue[:2]
        assert store.budget(SEED, 2).left == 2
    with pytest.raises(ValueError, match="budget_order"):
        StateStore(tmp_path / "t.sqlite", budget_order="newest")


@pytest_twisted.ensureDeferred
async def test_max_fetches_through_a_crawl_reports_what_waits(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=10) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, INCRECRAWL_MAX_FETCHES=4)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(first.changes("new")) == 4
        assert first.stats["increcrawl/budget/left"] == 6
        assert "increcrawl/budget/longest_wait_s" in first.stats
        assert any("INCRECRAWL_MAX_FETCHES=4: 4 of 10 due pages" in line for line in first.log)
        clock.advance(60)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(second.changes("new")) == 4
        assert not first.changes("new") & second.changes("new")
        clock.advance(60)
        third = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(third.changes("new")) == 2 and "increcrawl/budget/left" not in third.stats


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("batch_min", [100, 5])  # one extract per page; batch jobs
async def test_max_tokens_stops_queuing_and_the_rest_stays_due(
    tmp_path: Path, clock: Clock, batch_min: int
) -> None:
    with SampleSite(pages=12) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"),
            clock,
            api,
            INCRECRAWL_MAX_TOKENS=7,
            GEONODE_BATCH_MIN_URLS=batch_min,
        )
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert first.stats["geonode/tokens_charged"] == 7
        assert len(first.changes("new")) == 7
        assert first.stats["increcrawl/budget/tokens_left"] == 5
        assert any("INCRECRAWL_MAX_TOKENS=7 reached" in line for line in first.log)
        clock.advance(60)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert second.changes("new") == set(site.page_urls()) - first.changes("new")
        assert second.stats["geonode/tokens_charged"] == 5
        assert "increcrawl/budget/tokens_left" not in second.stats
