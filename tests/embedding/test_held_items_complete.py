"""When a run may deliver the gone items earlier runs held (``pages/pending.py``):
a run that went idle with every page it asked answered usably (``pages/answers.py``),
whatever closes it after; a bounded one once the slices went round since they were
held. Never while the page an item moved to was not seen (#50, 1-3)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, HOUR, Project, delivered

pytestmark = pytest.mark.e2e

BOUND = ("-s", "CLOSESPIDER_PAGECOUNT=1")


def _move_to_last(site: QuotesSite, index: int, text: str) -> tuple[str, str]:
    """Quote *index* leaves its page for the last one (a new quote in its place, the
    last page's last quote replaced by it): its (moved, replaced) texts."""
    moved = site.delete(index)
    site.insert(index, text)
    with site._lock:
        replaced = site.quotes[-1]
        site.quotes[-1] = moved
    return str(moved["text"]), str(replaced["text"])


def test_a_page_that_failed_keeps_the_run_from_delivering_held_items(tmp_path: Path) -> None:
    with QuotesSite(quotes=60) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 60
        moved, replaced = _move_to_last(site, 12, "\u201cNew on page two.\u201d")
        # Page two seen alone: its quote that left is held (page six not seen).
        first = delivered(project.crawl(*BOUND, advance=2 * DAY))
        assert first == [("new", "\u201cNew on page two.\u201d")]
        assert project.stat("increcrawl/items/held_over") == 1
        # Page six, due, answers 503 (retried out): the run goes idle, but did not
        # see it; the quote lives there: not delivered gone.
        site.delete_page(6, status=503)
        assert delivered(project.crawl(advance=HOUR)) == []
        assert site.requested["/page/6/"] == 3
        # Page six answers again: the quote moved there, nothing of it delivered.
        site.restore_page(6)
        third = delivered(project.crawl(advance=2 * DAY))
        assert third == [("gone", replaced)]
        assert ("new", moved) not in third
        assert project.stat("increcrawl/items/moved") == 1


def test_an_idle_run_closed_by_its_release_request_is_complete(tmp_path: Path) -> None:
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 30
        gone = site.delete(12)
        site.insert(12, "\u201cNew on page two.\u201d")
        site.edit(25, "\u201cEdited on page three.\u201d")
        first = delivered(project.crawl(*BOUND, advance=2 * DAY))
        assert first == [("new", "\u201cNew on page two.\u201d")]
        second = delivered(project.crawl(*BOUND, advance=HOUR))
        assert second == [("changed", "\u201cEdited on page three.\u201d")]
        # Nothing due: the run goes idle having seen every page it reaches; its
        # release request is the page CLOSESPIDER_PAGECOUNT counts, yet it delivers.
        assert delivered(project.crawl(*BOUND, advance=HOUR)) == [("gone", str(gone["text"]))]
        assert project.fetched == 0
        assert delivered(project.crawl(*BOUND, advance=HOUR)) == []


def test_slices_deliver_held_items_once_they_went_round(tmp_path: Path) -> None:
    with QuotesSite(quotes=70) as site:  # seven pages, one fetched in full a run
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 70
        moved, replaced = _move_to_last(site, 12, "\u201cNew on page two.\u201d")
        for n in (3, 4, 5, 6):
            site.edit((n - 1) * 10 + 5, f"\u201cEdited on page {n}.\u201d")
        runs = []
        for run in range(6):  # every run bounded: pages 2 to 7, one a run
            runs.append(delivered(project.crawl(*BOUND, advance=HOUR if run else 2 * DAY)))
            assert project.fetched == 1
        assert set(site.requested) == {"/page/7/"}
        # The quote that moved to page seven is neither gone nor new, though more
        # runs than the slices' first pages passed before one reached page seven.
        changes = [change for run in runs for change in run]
        assert not [change for change in changes if change[1] == moved], runs
        expected = [("new", "\u201cNew on page two.\u201d")]
        expected += [("changed", f"\u201cEdited on page {n}.\u201d") for n in (3, 4, 5, 6)]
        assert sorted(changes) == sorted(expected), runs
        # Page seven's quote replaced is gone, held by that bounded run: the next
        # one, bounded too (it stops at page three's edit), delivers it, since every
        # page due then was fetched after (the slices went round).
        site.edit(22, "\u201cEdited on page three again.\u201d")
        last = delivered(project.crawl(*BOUND, advance=2 * DAY))
        assert "/page/7/" not in site.requested
        assert last == [("changed", "\u201cEdited on page three again.\u201d"), ("gone", replaced)]


def test_a_page_that_always_fails_delays_held_items_at_most_held_for(tmp_path: Path) -> None:
    # A quote deleted for good; page six answers 503 at every run from then on: no
    # run is complete, and each holds the quote again. HELD_FOR (30 days) counts
    # from when it was first held, not from the last run a page failed.
    with QuotesSite(quotes=60) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 60
        gone = str(site.delete(12)["text"])
        site.delete_page(6, status=503)
        # (Page five's last quote came from page six: new, its gone side not seen.)
        assert ("gone", gone) not in delivered(project.crawl(advance=8 * DAY))  # day 8
        assert project.stat("increcrawl/items/held_over") == 1
        assert ("gone", gone) not in delivered(project.crawl(advance=16 * DAY))  # day 24
        assert delivered(project.crawl(advance=16 * DAY)) == [("gone", gone)]  # day 40


def test_a_failed_postback_is_not_cleared_by_another_to_the_same_url(tmp_path: Path) -> None:
    # Every grid page is a POST to /grid. A quote moves from grid page two to page
    # six, whose postback then answers 400; pages five to two (the same URL) answer
    # 200 after it. The run is not complete: the quote is not delivered gone.
    shutil.copy(Path(__file__).with_name("postback_grid.py"), tmp_path)
    grid = ("-s", "SPIDER_MODULES=postback_grid", "-s", "CONCURRENT_REQUESTS=1")
    with QuotesSite(quotes=60) as site:
        project = Project(tmp_path, site, "postback_grid")
        assert len(project.crawl(*grid)) == 60
        moved = site.delete(12)
        site.insert(12, "\u201cNew on page two.\u201d")
        with site._lock:
            site.quotes[59] = moved
        shown = site.shown
        site.shown = lambda n: None if n == 6 else shown(n)  # type: ignore[method-assign]
        assert delivered(project.crawl(*grid, advance=2 * DAY)) == [
            ("new", "\u201cNew on page two.\u201d")
        ]
        assert "Idle, but 1 pages asked did not answer usably" in project.log
