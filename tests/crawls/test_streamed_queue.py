"""The due queue is streamed: read a chunk at a time as the crawl answers the last
one, never all at once, with the budget's choice kept across chunks."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.spiders.incremental import IncrementalSpider
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(IncrementalSpider, "queue_chunk", 5)


@pytest_twisted.ensureDeferred
async def test_chunks_are_read_as_the_scheduler_drains(
    small_chunks, tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=23) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=2)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert result.changes("new") == set(site.page_urls())
        assert result.stats["increcrawl/due"] == 23
        assert all(site.fetched[f"/page/{i}"] == 1 for i in range(23))
        # A fetch budget keeps its choice across chunks.
        site.reset_counters()
        clock.advance(40 * DAY)
        limited = dict(settings, INCRECRAWL_MAX_FETCHES=12)
        result = await run_crawl(limited, sitemap_url=site.sitemap_url)
        assert result.stats["increcrawl/due"] == 12
        assert sum(site.fetched.values()) == 12
        assert result.stats["increcrawl/budget/left"] == 11


class RunningClock(Clock):
    """A clock that runs fast: every reading is *step* seconds after the last."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest_twisted.ensureDeferred
async def test_a_page_due_again_during_the_run_is_not_fetched_twice(
    small_chunks, tmp_path: Path
) -> None:
    # Two days pass at every reading of the clock: the pages of the first chunks are
    # due again (their next check has come) well before the last chunks are read.
    # Due is judged at the first chunk's time, so none of them is read again.
    clock = RunningClock(2 * DAY)
    with SampleSite(pages=23) as site:
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=1)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert result.changes("new") == set(site.page_urls())
        assert {path: count for path, count in site.fetched.items() if count != 1} == {}
        assert result.stats["increcrawl/due"] == 23
        assert result.stats["downloader/request_count"] == sum(site.requested.values())


def test_a_chunk_starts_where_the_last_ended_without_sorting(tmp_path: Path) -> None:
    # On a first run every row is due at the same time: a chunk must seek to where
    # the last one ended, not sort (or skip) the rows before it. At 1,000,000 rows
    # the sorting query took 520 ms a chunk (5 s at 10,000,000), this one 26 ms.
    store = StateStore(str(tmp_path / "s.sqlite"))
    params = {"seed": "s", "now": 0.0, "check": 0.0, "id": 0, "limit": 10}
    explain = "EXPLAIN QUERY PLAN " + store.database.sql.due_after
    plan = [row[3] for row in store.database.execute(explain, params)]
    store.close()
    assert not [step for step in plan if "TEMP B-TREE" in step], plan
    assert sum("next_check=? AND rowid>?" in step for step in plan) == 2, plan
