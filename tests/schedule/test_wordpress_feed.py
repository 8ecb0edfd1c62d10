"""WordPress's feed of its last edits, read beside its core sitemap (#52, 4): the
core sitemap (``/wp-sitemap.xml``) dates no post before WordPress 6.5; its Atom feed
ordered by last edit (``/feed/atom/?orderby=modified``) lists the ten last edited
posts, each dated by its edit. Daily runs through whole crawls with a moved clock:
every edit the feed announces is fetched the day it was made; a site whose feeds are
off is read from its sitemap as before, its discovery complete."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy import stats
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.schedule.test_feed_dates import atom

DAY = 86_400.0
HOUR = 3_600.0


def _changed(result: object) -> set[int]:
    return {int(url.rsplit("/", 1)[1]) for url in result.changes("changed")}  # type: ignore[attr-defined]


@pytest_twisted.ensureDeferred
async def test_a_wordpress_sitemap_brings_its_feed_of_last_edits(
    tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=20, lastmod_mode="none") as site:
        sitemap = site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.serve("/feed/atom/", atom(site, []))
        settings = crawl_settings(str(tmp_path / "state.sqlite"), clock)
        assert (await run_crawl(settings, sitemap_url=sitemap)).reason == "finished"
        last: list[int] = []
        for day in range(1, 15):  # any post, two a day, seen the day of its edit
            clock.advance(DAY)
            edited = [(3 * day) % 20, (7 * day + 1) % 20]
            for page in edited:
                site.edit(page, at=clock() - 3600)
            last = (edited + [p for p in last if p not in edited])[:10]
            site.serve("/feed/atom/", atom(site, last))
            result = await run_crawl(settings, sitemap_url=sitemap)
            assert result.reason == "finished"
            assert set(edited) <= _changed(result), day
            assert stats.DISCOVERY_INCOMPLETE not in result.stats
            # Its entries are no URLs of the run: not counted invalid.
            assert stats.INVALID_URLS not in result.stats, day
        assert site.requested["/feed/atom/"] == 15  # one request a run

        # Without it (the setting off): the same edits wait for their pages' checks.
        off = {**settings, "INCRECRAWL_WORDPRESS_FEED": False}
        missed = 0
        for day in range(15, 22):
            clock.advance(DAY)
            edited = [(3 * day) % 20, (7 * day + 1) % 20]
            for page in edited:
                site.edit(page, at=clock() - 3600)
            result = await run_crawl(off, sitemap_url=sitemap)
            missed += len(set(edited) - _changed(result))
        assert missed and site.requested["/feed/atom/"] == 15


@pytest_twisted.ensureDeferred
async def test_a_wordpress_site_with_its_feeds_off_is_read_as_before(
    tmp_path: Path, clock: Clock
) -> None:
    """Security plugins turn feeds off (a 404, or the home page): the feed is a signal,
    not a source: discovery stays complete, so a post deleted is still found gone,
    and the run says so once, quietly."""
    with SampleSite(pages=12, lastmod_mode="none") as site:
        sitemap = site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.fail_path("/feed/atom/", 404)
        settings = crawl_settings(str(tmp_path / "state.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=sitemap)
        assert first.reason == "finished" and len(first.changes("new")) == 12
        assert stats.DISCOVERY_INCOMPLETE not in first.stats
        assert stats.SITEMAP_ERRORS not in first.stats
        assert not [line for line in first.log if line.startswith("WARNING") and "feed" in line]
        site.fail_path("/feed/atom/", None)
        site.serve("/feed/atom/", b"<!doctype html><html><body>Home</body></html>", "text/html")
        site.delete(4)
        site.serve("/wp-sitemap.xml", site.sitemap_index())
        gone: set[str] = set()
        for _ in range(5):
            clock.advance(3 * DAY)
            result = await run_crawl(settings, sitemap_url=sitemap)
            assert stats.DISCOVERY_INCOMPLETE not in result.stats
            gone |= result.changes("gone")
        assert site.page_url(4) in gone


@pytest_twisted.ensureDeferred
async def test_a_feed_that_ends_early_gives_its_dates_quietly(tmp_path: Path, clock: Clock) -> None:
    """A feed cut off mid-entry (a proxy's timeout, a plugin's fatal error) is read
    the forgiving way for the dates it has; the run's discovery is its sitemaps',
    so it was never incomplete, as its warning said."""
    with SampleSite(pages=6, lastmod_mode="none") as site:
        sitemap = site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.serve("/feed/atom/", atom(site, []))
        settings = crawl_settings(str(tmp_path / "state.sqlite"), clock)
        assert len((await run_crawl(settings, sitemap_url=sitemap)).changes("new")) == 6
        clock.advance(DAY)
        site.edit(2, at=clock() - 3600)
        whole = atom(site, [2, 5])
        site.serve("/feed/atom/", whole[: whole.index(b"<entry>", whole.index(b"</entry>"))])
        result = await run_crawl(settings, sitemap_url=sitemap)
        assert _changed(result) == {2}
        assert stats.DISCOVERY_INCOMPLETE not in result.stats
        said = [line for line in result.log if "/feed/atom/" in line]
        assert said and not [line for line in said if line.startswith("WARNING")]
        assert "incomplete" not in said[0]


@pytest.fixture(params=["sqlite", "postgresql"])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_dsn"))
    return str(tmp_path / "s.sqlite")


@pytest_twisted.ensureDeferred
async def test_a_post_only_the_feed_lists_is_no_page_of_the_run(state: str, clock: Clock) -> None:
    """The feed is a signal, not a source: a post the sitemap leaves out (noindex, say)
    is neither fetched nor kept because the feed lists it."""
    with SampleSite(pages=8, lastmod_mode="none") as site:
        site.drop_from_sitemap(5)
        sitemap = site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.serve("/feed/atom/", atom(site, [5, 2]))
        first = await run_crawl(crawl_settings(state, clock), sitemap_url=sitemap)
        assert first.reason == "finished"
        assert site.page_url(5) not in first.changes("new")
        assert len(first.changes("new")) == 7


@pytest_twisted.ensureDeferred
async def test_a_deleted_post_a_cached_feed_still_lists_is_found_gone(
    state: str, clock: Clock
) -> None:
    """The run its sitemap drops a deleted post, a cached feed still lists it: the feed
    takes no row over (attached to it, a row was never missing again)."""
    with SampleSite(pages=8, lastmod_mode="none") as site:
        sitemap = site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.serve("/feed/atom/", atom(site, [3, 1]))
        settings = crawl_settings(state, clock)
        assert (await run_crawl(settings, sitemap_url=sitemap)).reason == "finished"
        clock.advance(HOUR)
        site.delete(3)
        site.serve("/wp-sitemap.xml", site.sitemap_index())
        site.edit(1, at=clock() - 60)  # the feed's bytes differ
        site.serve("/feed/atom/", atom(site, [1, 3]))
        gone = (await run_crawl(settings, sitemap_url=sitemap)).changes("gone")
        site.serve("/feed/atom/", atom(site, [1]))
        for _ in range(6):
            clock.advance(HOUR)
            gone |= (await run_crawl(settings, sitemap_url=sitemap)).changes("gone")
        assert site.page_url(3) in gone
