"""examples/quotes: the two project shapes every Scrapy user has, with the README's
two lines only (``ADDONS`` and ``INCRECRAWL_SKIP_NOT_DUE``), crawled for real
(``scrapy crawl`` in the project) over several runs with a moved clock:

- Scrapy's tutorial spider (items without a URL field, ten a page, the next page
  followed): only what changed is delivered, item by item;
- an ordinary ``CrawlSpider`` (every link followed from the home page): skipping a
  page never cuts the crawl, its requests are replayed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.servers import REPO

pytestmark = pytest.mark.e2e

QUOTES = REPO / "examples" / "quotes"
HOUR, DAY = 3_600.0, 86_400.0
KEY = "quotes-key-0123456789"


class Project:
    def __init__(
        self, tmp_path: Path, site: QuotesSite, spider: str, api: GeonodeStandIn | None = None
    ) -> None:
        self.tmp, self.site, self.spider, self.api = tmp_path, site, spider, api
        self.url = site.url  # also once the site is stopped
        self.now = 1_800_000_000.0
        (tmp_path / "tclock.py").write_text(
            f"def now():\n    return float(open({str(tmp_path / 'now')!r}).read())\n"
        )
        self.runs = 0
        self.log = ""
        self.db = str(tmp_path / "state.sqlite")  # or a PostgreSQL DSN

    def crawl(self, *args: str, advance: float = 0) -> list[dict]:
        self.now += advance
        (self.tmp / "now").write_text(str(self.now))
        self.runs += 1
        self.site.reset_counters()
        feed = self.tmp / f"run{self.runs}.jsonl"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GEONODE_API_KEY", "SCRAPY_SETTINGS_MODULE")
        }
        env["PYTHONPATH"] = os.pathsep.join([str(self.tmp), env.get("PYTHONPATH", "")])
        command = [
            sys.executable, "-m", "scrapy", "crawl", self.spider,
            "-a", f"start_url={self.url}/", *args,
            "-o", f"{feed}:jsonlines",
            "-s", f"INCRECRAWL_DB={self.db}",
            "-s", "INCRECRAWL_CLOCK=tclock.now",
            "-s", "TELNETCONSOLE_ENABLED=False",
        ]  # fmt: skip
        if self.api is not None:  # pages fetched through the Geonode API
            env["GEONODE_API_KEY"] = KEY
            command += ["-s", f"GEONODE_API_URL={self.api.url}"]
        done = subprocess.run(
            command, cwd=QUOTES, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
        self.log = done.stderr
        return [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []

    def stat(self, name: str) -> int:
        for line in self.log.splitlines():
            if f"'{name}':" in line:
                return int(line.split(":")[-1].strip().rstrip(",}"))
        return 0

    @property
    def fetched(self) -> int:
        """Pages the site answered in full this run (not 304)."""
        return sum(self.site.requested.values()) - sum(self.site.not_modified.values())


def delivered(items: list[dict]) -> list[tuple[str, str]]:
    return sorted((item["change"], item["text"]) for item in items)


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
            assert "fetched 0 of 6 pages with state (none at all)" in project.log

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


@pytest.mark.parametrize("skipping", [True, False])
@pytest.mark.parametrize("spider", ["pages", "sitemap", "numbered"])
def test_a_change_a_later_pipeline_failed_on_is_delivered_next_run(
    tmp_path: Path, spider: str, skipping: bool
) -> None:
    # The CrawlSpider, the SitemapSpider and response.follow with cb_kwargs, with
    # and without skipping: the project's storage fails once on an edited quote.
    with QuotesSite(quotes=50) as site:
        project = Project(tmp_path, site, spider)
        setting = ("-s", f"INCRECRAWL_SKIP_NOT_DUE={skipping}")
        assert len(project.crawl(*setting)) == 50
        edited = "\u201cEdited while the storage was down.\u201d"
        site.edit(45, edited)
        failing = ("-s", "QUOTES_FAIL_TEXT=storage was down")
        assert project.crawl(*setting, *failing, advance=2 * DAY) == []
        assert "reported again next run" in project.log
        retried = project.crawl(*setting, advance=HOUR)
        assert [(item["change"], item["text"]) for item in retried] == [("changed", edited)]
        assert project.crawl(*setting, advance=HOUR) == []
        if skipping:  # nothing due an hour later: nothing with items fetched
            assert project.fetched <= (1 if spider == "sitemap" else 0)
