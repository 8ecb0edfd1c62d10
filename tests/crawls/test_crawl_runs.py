"""Consecutive whole crawls against the sample site with a moved clock, in every mode."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, CrawlResult, crawl_settings, run_crawl

DAY = 86400.0
MODES = ["direct", "geonode", "geonode-error-mode"]


class Scenario:
    def __init__(self, mode: str, tmp_path: Path, clock: Clock, site: SampleSite, api) -> None:
        self.mode, self.clock, self.site, self.api = mode, clock, site, api
        self.db = str(tmp_path / "state.sqlite")
        # The adaptive rule, whose intervals these stories check to the second.
        self.settings = crawl_settings(self.db, clock, api, INCRECRAWL_POLICY="adaptive")

    async def run(self, **extra) -> CrawlResult:
        result = await run_crawl({**self.settings, **extra}, sitemap_url=self.site.sitemap_url)
        assert result.reason == "finished", result.log[-20:]
        assert not [line for line in result.log if line.startswith("ERROR")]
        return result

    def page(self, i: int):
        with StateStore(self.db) as store:
            return store.get(self.site.page_url(i))

    def extracts(self) -> int:
        return self.api.counters()["requests"].get("POST /v1/extract", 0) if self.api else 0


@pytest.fixture(params=MODES)
def scenario(request, tmp_path: Path, clock: Clock):
    with SampleSite(pages=12) as site:
        if request.param == "direct":
            yield Scenario("direct", tmp_path, clock, site, None)
            return
        mode = "error" if request.param.endswith("error-mode") else "metadata"
        with GeonodeStandIn(api_keys=[KEY], origin_status_mode=mode) as api:
            yield Scenario(request.param, tmp_path, clock, site, api)


@pytest_twisted.ensureDeferred
async def test_consecutive_runs(scenario: Scenario) -> None:
    site, clock = scenario.site, scenario.clock
    every = set(site.page_urls())
    volatile = {site.page_url(i) for i in range(12) if site.kind(i) == "volatile"}

    # Run 1: every page new, labelled as the README ("Items and stats") says.
    first = await scenario.run()
    assert first.changes("new") == every and len(first.items) == 12
    item = next(i for i in first.items if i["url"] == site.page_url(2))
    assert item["normalized_url"] == site.page_url(2)
    assert item["markdown"].startswith("# Page 2") and len(item["content_hash"]) == 64
    assert item["fetcher"] == ("direct" if scenario.mode == "direct" else "geonode")
    assert item["fetched_at"].endswith("+00:00") and item["http_status"] == 200
    assert first.stats["increcrawl/new"] == 12 and first.stats["increcrawl/due"] == 12
    # Spelling variants in the sitemap are one row each page.
    with StateStore(scenario.db) as store:
        assert store.count() == 12
    if scenario.mode == "direct":
        assert scenario.page(0).etag and scenario.page(1).last_modified

    # Run 2, same moment: nothing due, nothing requested.
    fetched, extracts = site.counters["pages"], scenario.extracts()
    second = await scenario.run()
    assert second.items == [] and second.stats.get("increcrawl/due", 0) == 0
    assert site.counters["pages"] == fetched and scenario.extracts() == extracts

    # Run 3, past the interval: all unchanged (304 where validators are known), none exported.
    clock.advance(DAY + 1)
    site.reset_counters()
    third = await scenario.run()
    assert third.items == [] and third.stats["increcrawl/unchanged"] == 12
    assert scenario.page(2).interval_s == 1.5 * DAY
    assert scenario.page(2).next_check == clock.now + 1.5 * DAY
    if scenario.mode == "direct":
        assert site.counters["conditional"] == 6 and site.counters["status/304"] == 6
    # With INCRECRAWL_EXPORT=all the unchanged pages are exported too.
    clock.advance(1.5 * DAY + 1)
    everything = await scenario.run(INCRECRAWL_EXPORT="all")
    assert everything.changes("unchanged") == every

    # Run 4: two edits, exactly those two changed; the volatile pages never are.
    site.edit(2)
    site.edit(4, text="A rewritten page.")
    clock.advance(2.25 * DAY + 1)
    fourth = await scenario.run()
    assert fourth.changes("changed") == {site.page_url(2), site.page_url(4)}
    assert not volatile & fourth.changes("changed")
    assert scenario.page(2).interval_s == 2.25 * DAY / 2

    # Run 5: one page 404, one 410: gone, and never fetched again.
    site.delete(5, status=404)
    site.delete(6, status=410)
    clock.advance(3.375 * DAY + 1)
    fifth = await scenario.run()
    assert fifth.changes("gone") == {site.page_url(5), site.page_url(6)}
    assert scenario.page(5).gone and scenario.page(6).gone
    site.reset_counters()
    clock.advance(40 * DAY)
    await scenario.run()
    assert site.fetched["/page/5"] == 0 and site.fetched["/page/6"] == 0

    # Dropped from the sitemap: counted missing, confirmed by a fetch on the third run.
    site.drop_from_sitemap(9)
    site.reset_counters()
    for run in (1, 2, 3):
        await scenario.run()
        assert scenario.page(9).missing_runs == run
        assert site.fetched["/page/9"] == (1 if run == 3 else 0)
    assert scenario.page(9).gone is False and scenario.page(9).fetch_count >= 2

    # A bumped lastmod makes its page due at once, with no clock movement.
    site.reset_counters()
    site.bump_lastmod(10)
    await scenario.run()
    assert site.fetched["/page/10"] == 1
    assert sum(site.fetched.values()) == 1

    # The runs table has one finished row a run.
    runs = (
        sqlite3.connect(scenario.db)
        .execute("SELECT count(*), count(finished_at), sum(discovery_complete) FROM runs")
        .fetchone()
    )
    assert runs[0] == runs[1] == runs[2] == 11


@pytest_twisted.ensureDeferred
async def test_a_listed_page_never_found_is_not_reported_gone(scenario: Scenario) -> None:
    """A sitemap entry that answers 404 before it ever answered 200 has nothing to
    delete downstream: the first crawl does not report it gone. It is kept as gone
    (re-checked slowly) and reported new once it answers."""
    site, clock = scenario.site, scenario.clock
    site.fail(3, 404)
    site.fail(4, 410)
    first = await scenario.run()
    dead = {site.page_url(3), site.page_url(4)}
    assert not first.changes("gone") and not dead & {item["url"] for item in first.items}
    assert "increcrawl/gone" not in first.stats
    assert first.stats["increcrawl/pages/never_found"] == 2
    assert first.stats["increcrawl/new"] == 10
    assert scenario.page(3).gone and scenario.page(4).gone
    assert scenario.page(3).change_count == 0
    # Not asked again at the next run, nor reported once it is asked.
    site.reset_counters()
    second = await scenario.run()
    assert site.fetched["/page/3"] == 0 and second.items == []
    clock.advance(2 * DAY + 1)
    third = await scenario.run()
    assert site.fetched["/page/3"] == 1 and not third.changes("gone")
    assert third.stats["increcrawl/pages/never_found"] == 2  # each time they are asked
    # It answers at last: new.
    site.fail(3, None)
    clock.advance(4 * DAY + 1)
    fourth = await scenario.run()
    assert site.page_url(3) in fourth.changes("new")
    assert not scenario.page(3).gone


@pytest_twisted.ensureDeferred
async def test_a_page_forgotten_then_deleted_is_reported_gone(scenario: Scenario) -> None:
    """``forget`` drops the row, not what the feed's reader holds: after the seed's
    first run, a 404 is reported gone even for a row never fetched since."""
    site, clock = scenario.site, scenario.clock
    first = await scenario.run()
    assert site.page_url(3) in first.changes("new")
    with StateStore(scenario.db) as store:
        assert store.forget(url=site.page_url(3)) == 1
    site.fail(3, 404)  # still listed
    clock.advance(2 * DAY)
    second = await scenario.run()
    assert second.changes("gone") == {site.page_url(3)}
    assert "increcrawl/pages/never_found" not in second.stats


@pytest_twisted.ensureDeferred
async def test_a_run_with_nothing_due_asks_only_what_discovery_needs(scenario: Scenario) -> None:
    """robots.txt and the sitemaps (the unchanged children answering 304), nothing else:
    with no page to fetch, the site's "not found" page (the soft-404 probe) tells
    nothing, and no page is asked of the API."""
    site = scenario.site
    await scenario.run()
    site.reset_counters()
    extracts = scenario.extracts()
    second = await scenario.run()
    assert second.stats.get("increcrawl/due", 0) == 0 and second.items == []
    assert set(site.requested) == {"/robots.txt", "/sitemap.xml", *_children(site)}
    assert site.counters["sitemap_304"] == len(_children(site))
    assert "increcrawl/soft_404/probes" not in second.stats
    assert scenario.extracts() == extracts
    # A run with pages due still asks for the site's "not found" page.
    scenario.clock.advance(2 * DAY)
    third = await scenario.run()
    assert third.stats["increcrawl/soft_404/probes"] == 1 and third.stats["increcrawl/due"] > 0


def _children(site: SampleSite) -> list[str]:
    return [f"/{site.child_name(n)}" for n in range(1, site.children + 1)]
