"""A feed's dates beside a sitemap without dates (#52, 4): a blog's Atom feed dates its
newest posts by their last edit (WordPress's ``<updated>``), its sitemap dates nothing
(WordPress before 6.5). Daily runs through whole crawls with a moved clock: an edit a
feed date announces is fetched the same day, and a post that fell off the feed is
checked as any undated page, whatever its last feed date said."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


def atom(site: SampleSite, pages: list[int]) -> bytes:
    """An Atom feed of *pages*, each dated by its last edit."""
    entries = "".join(
        f"<entry><title>p{i}</title><link rel='alternate' href='{site.page_url(i)}'/>"
        f"<updated>{_iso(site.modified_at(i))}</updated></entry>"
        for i in pages
    )
    return (
        "<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom'><title>A</title>"
        f"<updated>2026-01-01T00:00:00Z</updated>{entries}</feed>"
    ).encode()


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Days:
    """One crawl a day of the sitemap and the feed; which pages each run reported
    changed, and the rows' sitemap dates."""

    def __init__(self, site: SampleSite, db: str, clock: Clock) -> None:
        self.site, self.clock, self.db = site, clock, db
        self.settings = crawl_settings(db, clock)
        self.feed = site.serve("/feed/atom/", atom(site, []))

    async def run(self, feed_pages: list[int]) -> set[int]:
        self.site.serve("/feed/atom/", atom(self.site, feed_pages))
        result = await run_crawl(self.settings, sitemap_url=f"{self.site.sitemap_url},{self.feed}")
        assert result.reason == "finished", result.log[-20:]
        self.clock.advance(DAY)
        return {int(url.rsplit("/", 1)[1]) for url in result.changes("changed")}

    def edit(self, page: int) -> None:
        self.site.edit(page, at=self.clock() - 3600)

    def next_check(self, page: int) -> float:
        with sqlite3.connect(self.db) as connection:
            (due,) = connection.execute(
                "SELECT next_check FROM pages WHERE url = ?", (self.site.page_url(page),)
            ).fetchone()
        return (due - self.clock()) / DAY


@pytest_twisted.ensureDeferred
async def test_a_feed_date_announces_an_edit_and_promises_nothing_once_dropped(
    tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=12, lastmod_mode="none") as site:
        days = Days(site, str(tmp_path / "state.sqlite"), clock)
        newest = [9, 10, 11]
        await days.run(newest)  # the first crawl: every page
        # The feed's posts edited, one a day: each edit seen the day it was made
        # (its feed date moved), and the host's dates earn what they earn.
        for day in range(1, 7):
            days.edit(newest[day % 3])
            assert newest[day % 3] in await days.run(newest), day
        # A post falls off the feed (a newer one is published), then is edited: no
        # date announces that edit, and its last feed date must not stand for one.
        site.edit(0, at=clock() - 2 * DAY)  # "published": the newest, page 0
        newest = [0, 10, 11]
        await days.run(newest)
        days.edit(9)
        seen = None
        for day in range(14):
            if 9 in await days.run(newest):
                seen = day
                break
        assert seen is not None and seen <= 7, (seen, days.next_check(9))
