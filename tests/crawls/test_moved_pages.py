"""A page the sitemaps no longer list that answers a permanent redirect to another
page of the site has moved: its row is ``gone`` (#53, 1). Only then: an absence shorter
than INCRECRAWL_MISSING_RUNS, a target the state does not keep, or an API's answer of a
301 (a redirect it gave up following) is no move. Found by a review of the rule."""

from __future__ import annotations

from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


async def daily(db: str, clock: Clock, site: SampleSite, days: int, **extra) -> list:
    """(day, change, url) of every item of *days* daily runs."""
    seen = []
    for day in range(days):
        clock.advance(DAY)
        result = await run_crawl(crawl_settings(db, clock, **extra), sitemap_url=site.sitemap_url)
        assert result.reason == "finished", result.log[-10:]
        seen += [(day, item["change"], item["url"]) for item in result.items]
    return seen


@pytest_twisted.ensureDeferred
async def test_a_page_missing_for_one_run_is_no_move(tmp_path: Path, clock: Clock) -> None:
    """A listed page that has always redirected for good, left out of the sitemap for
    one run (a generator's hiccup): absence shorter than INCRECRAWL_MISSING_RUNS means
    nothing, so no ``gone`` (and no ``new`` when it is listed again)."""
    with SampleSite(pages=4) as site:
        site.redirect(1, site.page_url(2), status=301)
        db = str(tmp_path / "s.sqlite")
        await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
        site.drop_from_sitemap(1)
        seen = await daily(db, clock, site, 1)
        site.restore_to_sitemap(1)
        seen += await daily(db, clock, site, 5)
        moved = site.page_url(1)
    assert [s for s in seen if s[2] == moved] == [], seen


@pytest_twisted.ensureDeferred
async def test_a_move_to_a_page_the_state_does_not_keep_is_no_move(
    tmp_path: Path, clock: Clock
) -> None:
    """Its content would be nowhere: the old row keeps it, as before the rule."""
    with SampleSite(pages=4) as site:
        db = str(tmp_path / "s.sqlite")
        await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
        target = site.serve("/renamed-page", site.page_html(1).encode(), "text/html")
        site.drop_from_sitemap(1)
        site.redirect(1, target, status=301)
        seen = await daily(db, clock, site, 8)
        moved = site.page_url(1)
    assert (("gone", moved) in {(c, u) for _d, c, u in seen}) is False, seen


@pytest_twisted.ensureDeferred
async def test_an_apis_301_is_no_move(tmp_path: Path, clock: Clock, api) -> None:
    """The API reports the origin's 301 where it stopped following a chain (a broken
    deploy): no evidence the page moved; the listed pages keep their rows."""
    with SampleSite(pages=16) as site:
        db = str(tmp_path / "s.sqlite")
        batch = {"GEONODE_BATCH_MIN_URLS": 1}
        await run_crawl(crawl_settings(db, clock, api, **batch), sitemap_url=site.sitemap_url)
        for i in range(1, 14):  # longer than the API follows
            site.redirect(i, site.page_url(i + 1), status=301)
        seen = await daily(db, clock, site, 4, api=api, **batch)
    assert [s for s in seen if s[1] == "gone"] == [], seen
