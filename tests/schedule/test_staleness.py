"""Freshness where sitemap dates say nothing (#52, 1 and 2): daily runs through whole
crawls with a moved clock, on a site whose sitemap carries no dates. An edit after a
long quiet spell is seen within what the host's change rate justifies (and within
INCRECRAWL_MAX_STALENESS when set); pages first seen together do not stay in
lockstep, so daily runs do similar amounts of work."""

from __future__ import annotations

import random
import statistics
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


class DailyRuns:
    """One crawl a day of a site without dates; edits made between runs, and when
    each was first seen (the run that reported the page changed)."""

    def __init__(self, site: SampleSite, db: str, clock: Clock, **settings: object) -> None:
        self.site, self.clock = site, clock
        self.settings = crawl_settings(db, clock, **settings)
        self.day = 0
        self.pending: dict[int, int] = {}  # page -> day of its oldest edit not seen yet
        self.delays: dict[int, list[tuple[int, int]]] = {}  # page -> (edit day, delay)
        self.requests: list[int] = []  # page requests per run

    def edit(self, page: int) -> None:
        self.site.edit(page)
        self.pending.setdefault(page, self.day)

    async def run(self) -> None:
        before = sum(self.site.fetched.values())
        result = await run_crawl(self.settings, sitemap_url=self.site.sitemap_url)
        assert result.reason == "finished", result.log[-20:]
        self.requests.append(sum(self.site.fetched.values()) - before)
        for url in result.changes("changed"):
            page = int(url.rsplit("/", 1)[1])
            if page in self.pending:
                edited = self.pending.pop(page)
                self.delays.setdefault(page, []).append((edited, self.day - edited))
        self.clock.advance(DAY)
        self.day += 1

    def worst_delay(self, pages: range | list[int], after: int = 0) -> int:
        """The longest an edit made on or after day *after* waited to be seen (an edit
        never seen waits until today)."""
        seen = [d for p in pages for edited, d in self.delays.get(p, []) if edited >= after]
        unseen = [self.day - edited for p, edited in self.pending.items() if edited >= after]
        return max(seen + unseen, default=0)


@pytest_twisted.ensureDeferred
async def test_an_edit_after_a_quiet_spell_is_seen_within_the_hosts_rate(
    tmp_path: Path, clock: Clock
) -> None:
    # 60 posts, two edited a day (each post about monthly): the host's rate justifies
    # a check every ~6 days (0.17 chance of an edit). Post 7 stands still until day
    # 17, then is edited on days 17, 21 and 25, as in the WordPress story.
    rng = random.Random(52)
    with SampleSite(pages=60, lastmod_mode="none") as site:
        runs = DailyRuns(site, str(tmp_path / "s.sqlite"), clock)
        for day in range(40):
            if day in (17, 21, 25):
                runs.edit(7)
            if day:
                for page in rng.sample([p for p in range(60) if p != 7], 2):
                    runs.edit(page)
            await runs.run()
    assert runs.worst_delay([7]) <= 8, runs.delays.get(7)
    # Not the quiet post only: every edit from the third week on is seen within it.
    assert runs.worst_delay(range(60), after=14) <= 8


@pytest_twisted.ensureDeferred
async def test_max_staleness_bounds_every_wait(tmp_path: Path, clock: Clock) -> None:
    # A quiet host (one post edited a fortnight), whose rate justifies long waits:
    # the user's bound of 7 days still has every edit seen within 7 days and a run.
    with SampleSite(pages=30, lastmod_mode="none") as site:
        runs = DailyRuns(site, str(tmp_path / "s.sqlite"), clock, INCRECRAWL_MAX_STALENESS="7d")
        for day in range(40):
            if day in (17, 21, 25):
                runs.edit(7)
            if day and day % 14 == 0:
                runs.edit(day % 30)
            await runs.run()
    assert runs.worst_delay(range(30)) <= 8, runs.delays


@pytest_twisted.ensureDeferred
async def test_daily_runs_on_a_new_site_do_similar_amounts_of_work(
    tmp_path: Path, clock: Clock
) -> None:
    rng = random.Random(7)
    with SampleSite(pages=60, lastmod_mode="none") as site:
        runs = DailyRuns(site, str(tmp_path / "s.sqlite"), clock)
        for day in range(30):
            if day:
                runs.edit(rng.randrange(60))
            await runs.run()
    later = runs.requests[8:]  # after day 7
    median = statistics.median(later)
    assert max(later) <= 1.5 * median, " ".join(map(str, runs.requests))
