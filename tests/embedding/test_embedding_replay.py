"""examples/quotes through the add-on: what skipping keeps of a page's requests (their
cb_kwargs, what spider middlewares did), a SitemapSpider, a PostgreSQL state, pagers
and items moving between pages."""

from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, HOUR, KEY, Project, delivered

pytestmark = pytest.mark.e2e


def test_requests_with_cb_kwargs_are_replayed_with_them(tmp_path: Path) -> None:
    with QuotesSite(quotes=70) as site:
        project = Project(tmp_path, site, "numbered")  # response.follow(..., cb_kwargs=)
        first = project.crawl()
        assert len(first) == 70 and {item["page"] for item in first} == set(range(1, 8))
        assert project.crawl(advance=HOUR) == []
        assert project.fetched == 0 and project.stat("increcrawl/replayed") == 6
        # Two days later: every page asked conditionally; the six unchanged answer 304
        # and their "Next" requests are made again, with their page number.
        site.edit(65, "\u201cEdited on the last page.\u201d")
        changes = project.crawl(advance=2 * DAY)
        assert [(item["change"], item["page"], item["changed_fields"]) for item in changes] == [
            ("changed", 7, ["text"])
        ]
        assert sum(site.not_modified.values()) == 6


def test_a_sitemap_spider_fetches_the_sitemap_and_what_is_due(tmp_path: Path) -> None:
    with QuotesSite(quotes=50) as site:
        project = Project(tmp_path, site, "sitemap")
        assert len(project.crawl()) == 50
        assert project.crawl(advance=HOUR) == []
        assert dict(site.requested) == {"/sitemap.xml": 1}  # it has no items: no state
        site.add(10)  # a sixth page, in the sitemap
        added = project.crawl(advance=HOUR)
        assert delivered(added) == sorted(("new", str(quote["text"])) for quote in site.quotes[50:])
        assert dict(site.requested) == {"/sitemap.xml": 1, "/page/6/": 1}


def test_the_tutorial_spider_on_a_postgresql_state(tmp_path: Path, postgres_dsn: str) -> None:
    # A shared state: rows and memories read off the reactor's thread.
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        project.db = postgres_dsn
        assert len(project.crawl()) == 30
        assert project.crawl(advance=HOUR) == []
        assert project.fetched == 0 and project.stat("increcrawl/replayed") == 2
        site.edit(25, "\u201cEdited on a shared state.\u201d")
        changes = project.crawl(advance=2 * DAY)
        assert [(item["change"], item["changed_fields"]) for item in changes] == [
            ("changed", ["text"])
        ]
        assert sum(site.not_modified.values()) == 2  # the others, their requests replayed


def test_replayed_requests_keep_what_spider_middlewares_did(tmp_path: Path) -> None:
    # DEPTH_LIMIT (Scrapy's DepthMiddleware, a spider middleware): the pages past the
    # limit are never requested, also when the pages before them are skipped and
    # their requests replayed; a lower limit set later is honoured by the replay.
    with QuotesSite(quotes=100) as site:
        project = Project(tmp_path, site, "quotes")
        depth = ("-s", "DEPTH_LIMIT=3")
        assert len(project.crawl(*depth)) == 40
        assert set(site.requested) == {"/", "/page/2/", "/page/3/", "/page/4/"}
        assert project.crawl(*depth, advance=HOUR) == []
        assert dict(site.requested) == {}  # every page skipped, nothing past the limit
        assert project.stat("increcrawl/replayed") == 3  # page 4's "Next" was never kept
        project.crawl(*depth, advance=2 * DAY)  # all due: asked, 304, replayed
        assert set(site.requested) == {"/", "/page/2/", "/page/3/", "/page/4/"}
        assert sum(site.not_modified.values()) == 4
        assert project.crawl("-s", "DEPTH_LIMIT=2", advance=HOUR) == []
        assert project.stat("increcrawl/replayed") == 2  # page 3's "Next" is at depth 3


def test_a_pager_link_is_the_listings_navigation_not_a_change(tmp_path: Path) -> None:
    # A page's fingerprint covers the links of its main content, by the rules of the
    # incremental spider's text: the pager sits in the page's <nav>, so a listing that
    # gains a "Next" link has not changed (its schedule is not cut); the link is kept
    # with its requests all the same, so the pages after it are still reached.
    with QuotesSite(quotes=100) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 100  # ten full pages, each due a day later
        site.add(10)  # page 11: page 10's items are the same, it gains a "Next" link
        added = project.crawl(advance=2 * DAY)
        assert delivered(added) == sorted(("new", str(q["text"])) for q in site.quotes[100:])
        assert site.requested["/page/10/"] == 1 and site.not_modified["/page/10/"] == 0
        assert project.stat("increcrawl/items/unchanged") == 10  # page 10's own quotes
        assert project.stat("increcrawl/changed") == 0  # page 10 did not change
        assert "Traceback" not in project.log

        # Page 12, linked from page 11 only: found when page 11 is due (a day after
        # it was new), page 10 skipped on the way, its kept "Next" made again.
        site.add(10)
        found = project.crawl(advance=1.1 * DAY)
        assert delivered(found) == sorted(("new", str(q["text"])) for q in site.quotes[110:])
        assert site.requested["/page/11/"] == 1 and site.requested["/page/12/"] == 1
        assert "/page/10/" not in site.requested and "/page/9/" not in site.requested


@pytest.mark.parametrize("mode", ["direct", "geonode"])
def test_items_that_move_between_pages_are_not_delivered_again(tmp_path: Path, mode: str) -> None:
    # A quote added at the top moves every quote one place down: the last of each
    # page is the next page's first (the last one on a new page). The same quotes:
    # only the added one is delivered; removing it moves them back.
    with QuotesSite(quotes=35) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        project = Project(tmp_path, site, "quotes", api if mode == "geonode" else None)
        assert len(project.crawl()) == 35
        added = site.insert(0, "\u201cA quote at the top.\u201d")
        site.edit(25, "\u201cEdited on page three.\u201d")  # it stayed on its page
        changes = project.crawl(advance=2 * DAY)
        assert delivered(changes) == [
            ("changed", "\u201cEdited on page three.\u201d"),
            ("new", added["text"]),
        ]
        assert project.stat("increcrawl/items/moved") == 3  # pages 1-2, 2-3, 3-4
        assert "unchanged items not delivered (3 of them moved from another page)" in project.log
        assert "Traceback" not in project.log and "ERROR" not in project.log

        site.delete(0)
        changes = project.crawl(advance=2 * DAY)
        assert delivered(changes) == [("gone", added["text"])]
        assert project.stat("increcrawl/items/moved") == 3

        # Nothing left over: the next run (all due) delivers nothing.
        assert project.crawl(advance=2 * DAY) == []
        assert project.stat("increcrawl/items/moved") == 0


def test_a_run_that_does_not_reach_the_site_claims_no_requests_saved(tmp_path: Path) -> None:
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 30
        site.stop()  # the site is down: every page due, none answers
        assert project.crawl("-s", "RETRY_TIMES=0", advance=2 * DAY) == []
        assert "reached 0 of the 3 pages with state" in project.log
        assert "not reached" in project.log and "fewer" not in project.log
