"""Releases of held items (``pages/moved.py``): a run may release twice (its check
of unreached pages holds more items after the first), and another ``spider_idle``
handler may feed the crawl as it goes idle; neither delivers a living item `gone`
(#50, third review)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, Project, delivered

pytestmark = pytest.mark.e2e

NEW = "\u201cNew on page two.\u201d"


def _move(site: QuotesSite, index: int, to: int) -> tuple[str, str]:
    """Quote *index* leaves its page (a new quote in its place) for position *to*, in
    place of the quote there: the (moved, replaced) texts."""
    moved = site.delete(index)
    site.insert(index, NEW)
    with site._lock:
        replaced = site.quotes[to]
        site.quotes[to] = moved
    return str(moved["text"]), str(replaced["text"])


def test_a_second_release_in_a_run_keeps_the_first_ones_pairs(tmp_path: Path) -> None:
    # A bounded run holds X, gone from page two (it moved to page five). The next run
    # pairs it as moved at its first idle; its check of the unreached page seven (a
    # 404) holds that page's items, and a second release follows. X's row went with
    # the first release: no later run delivers it gone.
    unreached = ("-s", "INCRECRAWL_UNREACHED_RUNS=1")
    with QuotesSite(quotes=70) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl(*unreached)) == 70
        moved, _ = _move(site, 12, 49)
        bounded = project.crawl(*unreached, "-s", "CLOSESPIDER_PAGECOUNT=1", advance=2 * DAY)
        assert delivered(bounded) == [("new", NEW)]
        with site._lock:
            del site.quotes[60:]  # page seven: no link leads there, it answers 404
        second = delivered(project.crawl(*unreached, advance=6 * DAY))
        assert ("gone", moved) not in second and ("new", moved) not in second
        assert site.requested["/page/7/"] >= 1
        third = delivered(project.crawl(*unreached, advance=6 * DAY))
        assert ("gone", moved) not in third


def test_a_page_another_idle_handler_schedules_is_seen_before_a_release(
    tmp_path: Path,
) -> None:
    # Page six is fed by the spider's own spider_idle handler; a quote moved there
    # from page two. The run is not complete until page six answered: the quote is
    # moved, neither gone nor new.
    shutil.copy(Path(__file__).with_name("late_pages.py"), tmp_path)
    late = ("-s", "SPIDER_MODULES=late_pages")
    with QuotesSite(quotes=60) as site:
        project = Project(tmp_path, site, "late_pages")
        assert len(project.crawl(*late)) == 60
        _, replaced = _move(site, 12, 59)
        run = delivered(project.crawl(*late, advance=2 * DAY))
        assert run == [("gone", replaced), ("new", NEW)]
        assert project.stat("increcrawl/items/moved") == 1
