"""examples/quotes: the two project shapes every Scrapy user has, with the README's
two lines only (``ADDONS`` and ``INCRECRAWL_SKIP_NOT_DUE``), crawled for real
(``scrapy crawl`` in the project) over several runs with a moved clock:

- Scrapy's tutorial spider (items without a URL field, ten a page, the next page
  followed): only what changed is delivered, item by item;
- an ordinary ``CrawlSpider`` (every link followed from the home page): skipping a
  page never cuts the crawl, its requests are replayed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, HOUR, KEY, Project, delivered

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode", ["direct", "geonode"])
def test_the_tutorial_spider_delivers_only_what_changed(tmp_path: Path, mode: str) -> None:
    with QuotesSite(quotes=100) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        project = Project(tmp_path, site, "quotes", api if mode == "geonode" else None)
        first = project.crawl()
        assert len(first) == 100 and {item["change"] for item in first} == {"new"}
        assert set(first[0]) >= {"text", "author", "tags"}
        assert site.requested["/"] == 1 and len(site.requested) == 10

        # An hour later nothing is due: nothing is delivered, and not one page is
        # fetched (the home page is not due; the pages it leads to are not either).
        assert project.crawl(advance=HOUR) == []
        assert project.fetched == 0
        assert project.stat("increcrawl/skipped/not_due") == 10
        assert project.stat("increcrawl/replayed") == 9  # each skipped page's "Next"
        assert "skipped 10 pages not due and 0 not modified (304), replayed 9" in project.log
        assert "Traceback" not in project.log and "ERROR" not in project.log

        # Two days later every page is due: one quote edited, one deleted from the
        # last page, five added (a new last page). Only those are delivered.
        site.edit(14, "\u201cAn edited quote.\u201d")
        gone = site.delete(99)
        site.add(5)
        changes = project.crawl(advance=2 * DAY)
        assert delivered(changes) == sorted(
            [("changed", "\u201cAn edited quote.\u201d"), ("gone", gone["text"])]
            + [("new", str(quote["text"])) for quote in site.quotes[99:]]
        )
        (edited,) = [item for item in changes if item["change"] == "changed"]
        assert edited["changed_fields"] == ["text"]
        assert edited["author"] == site.quotes[14]["author"]
        (removed,) = [item for item in changes if item["change"] == "gone"]
        assert removed["author"] == gone["author"] and removed["tags"] == gone["tags"]
        assert site.requested["/page/11/"] == 1  # the new page, through the "Next" link
        if mode == "direct":
            assert site.not_modified["/"] == 1  # unchanged pages answered 304...
            assert project.stat("increcrawl/replayed") >= 1  # ...their requests replayed
            # Suppressed: the other quotes of the two pages that changed (the unchanged
            # pages answered 304: their callback never ran).
            assert project.stat("increcrawl/items/unchanged") == 9 + 9
        else:  # the API does not pass the site's validators on: every page fetched whole
            assert project.fetched == 11
            assert project.stat("increcrawl/items/unchanged") == 100 - 2
            assert api.counters()["requests"]["POST /v1/extract"] > 0

        # The same once more: nothing new. The new last page is not due either.
        assert project.crawl(advance=HOUR) == []
        assert project.fetched == 0
        assert project.stat("increcrawl/skipped/not_due") == 11

        # A later pipeline fails on an edited quote: it is delivered by the next
        # run (its page due), the rest of the crawl skipped as before.
        site.edit(3, "\u201cEdited while the storage was down.\u201d")
        failing = ("-s", "QUOTES_FAIL_TEXT=storage was down")
        assert project.crawl(*failing, advance=3 * DAY) == []
        retried = project.crawl(advance=HOUR)
        assert delivered(retried) == [("changed", "\u201cEdited while the storage was down.\u201d")]
        assert site.requested["/"] == 1 and project.fetched == 1


def test_without_skipping_every_page_is_fetched_and_only_changes_delivered(
    tmp_path: Path,
) -> None:
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        no_skipping = ("-s", "INCRECRAWL_SKIP_NOT_DUE=False")
        assert len(project.crawl(*no_skipping)) == 30
        assert project.crawl(*no_skipping, advance=HOUR) == []
        assert project.fetched == 3 and project.stat("increcrawl/items/unchanged") == 30
        site.edit(12, "\u201cEdited, nothing skipped.\u201d")
        changes = project.crawl(*no_skipping, advance=HOUR)
        assert [(item["change"], item["changed_fields"]) for item in changes] == [
            ("changed", ["text"])
        ]


@pytest.mark.parametrize("mode", ["direct", "geonode"])
def test_a_crawl_spider_is_never_cut_by_skipping(tmp_path: Path, mode: str) -> None:
    with QuotesSite(quotes=60) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        project = Project(tmp_path, site, "pages", api if mode == "geonode" else None)
        first = project.crawl()
        assert len(first) == 60 and {item["change"] for item in first} == {"new"}
        assert len(site.requested) == 6  # "/" (the first page) and /page/2/ to /page/6/
        assert site.requested["/"] == 1  # its own header link: skipped, just fetched

        # Run after run, an hour apart: nothing due, nothing fetched, nothing lost.
        for _ in range(2):
            assert project.crawl(advance=HOUR) == []
            assert project.fetched == 0
            assert project.stat("increcrawl/skipped/not_due") == 6
            assert "skipped 6 pages not due" in project.log
            assert "Start request " + site.url + "/ is not due: not fetched, the 2" in project.log
            # Pages 2 to 6: skipped, for the home page's replayed requests only, that
            # no response showed; the home page was fetched within 5 days, so they
            # reach them, counted apart (``pages/listings.py``, ``unreached.py``).
            assert "fetched 0 of 6 pages with state (none at all); 5 pages skipped " in project.log
            assert "reached by recent replays only" in project.log

        # A page added and one edited far from the home page: found and delivered as
        # soon as the pages are due, every page reached again.
        site.edit(45, "\u201cEdited on page five.\u201d")
        site.add(10)
        changes = project.crawl(advance=2 * DAY)
        assert delivered(changes) == sorted(
            [("changed", "\u201cEdited on page five.\u201d")]
            + [("new", str(quote["text"])) for quote in site.quotes[60:]]
        )
        assert set(site.requested) == {"/", *(f"/page/{n}/" for n in range(2, 8))}
        if mode == "geonode":  # no validators passed on: every due page fetched whole
            assert project.fetched == 7 and site.not_modified.total() == 0
            assert api.counters()["requests"]["POST /v1/extract"] >= 7
        else:  # the unchanged ones answered 304, their links replayed
            assert sum(site.not_modified.values()) == 4

        # A run cut short (the project's own page limit) says it did not reach the
        # site, and claims no requests saved.
        site.edit(2, "\u201cEdited on the first page.\u201d")
        cut = project.crawl("-s", "CLOSESPIDER_PAGECOUNT=1", advance=40 * DAY)
        assert delivered(cut) == [("changed", "\u201cEdited on the first page.\u201d")]
        assert "of the 7 pages with state" in project.log and "not reached" in project.log
        assert "fewer" not in project.log
