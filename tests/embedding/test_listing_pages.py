"""Listing pages in the add-on (issue #50, item 12): a Hugo blog crawled by a
``CrawlSpider`` with rules, daily, a post edited, one added and one deleted between
runs. The home page, its pagination, the section and the tags' pages yield links
only: they have a schedule of their own (``pages/listings.py``), so they are
skipped while not due and read again at least every ``UNREACHED_AGE``, and the
change set is the truth (a new post found within that age, a deleted one ``gone``
within 7 days). Pages reached by replays of recently fetched pages are not checked
directly; a SitemapSpider's sitemap is still read every run."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.pages.unreached import UNREACHED_AGE
from tests.embedding.blog_runs import DAY, BlogSitemapSpider, Run, daily_runs
from tests.support.blog import HugoBlog
from tests.support.nginx import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]

POST = re.compile(r"^/posts/post-\d+/$")
AGE_DAYS = UNREACHED_AGE / DAY
EDITED, DELETED = "post-005", "post-010"
ADDED_ON, DELETED_ON = 3, 6
#: Daily runs: past the first weeks, where posts' learned intervals pass 5 days.
DAYS = 30


def _edit_and_add(blog: HugoBlog) -> None:
    blog.edit(EDITED)
    blog.add()


def _delete(blog: HugoBlog) -> None:
    blog.delete(DELETED)


def _listings(runs: list[Run]) -> set[str]:
    """The pages of the blog that are no post: those the first run fetched."""
    return {path for path in runs[0].fetched if not POST.match(path)}


@pytest_twisted.ensureDeferred
async def test_listings_are_skipped_while_not_due_and_the_change_set_is_the_truth(
    tmp_path: Path,
) -> None:
    edits = {ADDED_ON: _edit_and_add, DELETED_ON: _delete}
    blog, runs = await daily_runs(tmp_path, DAYS, edits, later=31)
    daily = runs[:DAYS]
    first = runs[0]
    assert Counter(change for change, _ in first.changes()) == {"new": 30}
    added = blog.url_of("post-031")
    # Every change delivered once, none more (the last run, 31 days on: all due).
    later = Counter(change for run in runs[1:] for change in run.changes())
    assert later == Counter(
        {("changed", blog.url_of(EDITED)): 1, ("new", added): 1, ("gone", blog.url_of(DELETED)): 1}
    )
    # Within bounded delays: the new post once a listing showing it was read again
    # (at most UNREACHED_AGE), the deleted one gone within 7 days of daily runs.
    found = next(run.day for run in daily if ("new", added) in run.changes())
    assert found - ADDED_ON <= AGE_DAYS, found
    gone = next(run.day for run in daily if ("gone", blog.url_of(DELETED)) in run.changes())
    assert gone - DELETED_ON <= 7, gone

    listings = _listings(runs)
    assert {"/", "/page/2/", "/posts/", "/tags/"} <= listings, sorted(listings)
    kept = {path for path in listings if path in daily[-1].fetched or _lasts(path, daily)}
    fetches = {path: [run.day for run in daily if path in run.fetched] for path in kept}
    # Skipped on the runs they were not due (they were fetched every run)...
    read = sum(len(days) for days in fetches.values())
    assert read <= 0.6 * len(kept) * len(daily), (read, len(kept), fetches)
    # ...and read again at least every UNREACHED_AGE.
    for path, days in fetches.items():
        gaps = [b - a for a, b in zip(days, [*days[1:], daily[-1].day + 1], strict=True)]
        assert max(gaps) <= AGE_DAYS, (path, days)

    # The requests a run makes fall: a week's, posts and checks included, are fewer
    # than half the listings' every day (they were all fetched every run).
    assert sum(len(run.fetched) for run in daily[-7:]) < 7 * len(listings) / 2, [
        len(run.fetched) for run in daily
    ]
    # Pages reached by the replays of recently fetched pages are not checked
    # directly: only pages that left the site are (the deleted post, a pagination
    # page gone when the post count fell back).
    checked = Counter(url for run in daily for url in run.checked)
    left = {blog.url_of(DELETED), f"{blog.base_url}/page/7/", f"{blog.base_url}/posts/page/7/"}
    assert set(checked) <= left, checked
    # The run summary counts them apart from the pages a response reached.
    recent = [run for run in daily if run.stats.get("increcrawl/unreached/replayed_recent")]
    assert recent and all("by recent replays only" in "\n".join(r.summary) for r in recent)


def _lasts(path: str, runs: list[Run]) -> bool:
    """Whether *path* still exists by the end (fetched on one of the last runs)."""
    return any(path in run.fetched for run in runs[-int(AGE_DAYS) :])


@pytest_twisted.ensureDeferred
async def test_a_sitemap_spiders_sitemap_is_read_every_run(tmp_path: Path) -> None:
    blog, runs = await daily_runs(tmp_path, 4, {2: lambda blog: blog.add()}, BlogSitemapSpider)
    assert all(run.fetched.count("/sitemap.xml") == 1 for run in runs), [r.fetched for r in runs]
    assert ("new", blog.url_of("post-031")) in runs[2].changes()


@pytest_twisted.ensureDeferred
async def test_listings_on_a_postgresql_state(tmp_path: Path, postgres_dsn: str) -> None:
    # A shared state: a listing's row and memory are read off the reactor's thread.
    edits = {ADDED_ON: _edit_and_add}
    blog, runs = await daily_runs(tmp_path, 8, edits, later=31, INCRECRAWL_DB=postgres_dsn)
    assert Counter(change for change, _ in runs[0].changes()) == {"new": 30}
    later = Counter(change for run in runs[1:] for change in run.changes())
    assert later == Counter(
        {("changed", blog.url_of(EDITED)): 1, ("new", blog.url_of("post-031")): 1}
    )
    listings = _listings(runs)
    read = sum(1 for run in runs[1:8] for path in run.fetched if path in listings)
    assert read <= 0.75 * 7 * len(listings), read  # all of them every run, before
    # The home page twice a run at most, as Scrapy asks: its start request is
    # dont_filter, so the first post's link home is sent too, the rest filtered (a
    # listing asked again in a run is fetched again: after a login its links differ).
    assert all(run.fetched.count("/") <= 2 for run in runs)


@pytest_twisted.ensureDeferred
async def test_a_post_that_yields_no_item_for_a_while_stays_a_page_of_items(
    tmp_path: Path,
) -> None:
    # Emptied on day 1 (its page produces links only), back as it was on day 2: it
    # is not taken for a listing (its memory keeps its item), so its item is
    # unchanged, never delivered new.
    kept: dict[str, str] = {}

    def empty(blog: HugoBlog) -> None:
        kept["text"] = blog.posts[EDITED].text
        blog.posts[EDITED].text = ""

    def restore(blog: HugoBlog) -> None:
        blog.posts[EDITED].text = kept["text"]

    _, runs = await daily_runs(tmp_path, 3, {1: empty, 2: restore}, later=31)
    assert len(runs[0].items) == 30
    assert f"/posts/{EDITED}/" in runs[1].fetched  # fetched, no item
    assert [run.changes() for run in runs[1:]] == [[], [], []]
