"""examples/catalog and examples/quotes with the add-on: a page crawled before
that now answers 404 or 410 (still linked) is recorded gone, and each item it
yielded last time is delivered once, ``gone``, through the pipelines and the feed;
not again while it stays gone, and its items are ``new`` when it comes back."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.testing import SampleSite
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import Project as QuotesProject
from tests.embedding.quotes_project import delivered
from tests.embedding.test_catalog_project import DAY, HOUR, Project
from tests.support.process import run_process

pytestmark = pytest.mark.e2e


def _gone(tmp_path: Path, url: str) -> bool:
    with sqlite3.connect(tmp_path / "state.sqlite") as con:
        (gone,) = con.execute("SELECT gone FROM pages WHERE url = ?", (url,)).fetchone()
    return bool(gone)


def _status(tmp_path: Path) -> str:
    """``scrapy increcrawl status`` on the crawl's database, as a user runs it."""
    db = tmp_path / "state.sqlite"
    command = [sys.executable, "-m", "scrapy", "increcrawl", "status", "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, tmp_path).stdout


@pytest.mark.parametrize(("spider", "status"), [("pages", 404), ("variants", 410)])
def test_a_page_that_answers_404_or_410_delivers_its_items_gone_once(
    tmp_path: Path, spider: str, status: int
) -> None:
    with SampleSite(pages=6) as site:
        project = Project(tmp_path, site)
        url = site.page_url(3)
        first = project.crawl(spider=spider)
        before = [item for item in first if item["url"] == url]
        assert before and {item["change"] for item in before} == {"new"}

        # The site deletes page 3; the home page still links to it. Two days later
        # it is due.
        site.delete(3, status=status, linked=True)
        site.reset_counters()
        gone = project.crawl(spider=spider, advance=2 * DAY)
        assert site.requested["/page/3"] == 1
        assert {item["change"] for item in gone} == {"gone"}
        fields = ("url", "sku", "title", "description", "text")
        assert sorted(tuple(item.get(f) for f in fields) for item in gone) == sorted(
            tuple(item.get(f) for f in fields) for item in before
        )
        assert all(item["normalized_url"] for item in gone)
        assert project.stat("increcrawl/gone") == 1
        assert ", 1 gone," in project.log
        assert _gone(tmp_path, url)
        assert "live 6, gone 1" in _status(tmp_path)  # five pages and the listing

        # An hour later: not due, not requested, nothing delivered.
        site.reset_counters()
        assert project.crawl(spider=spider, advance=HOUR) == []
        assert site.requested["/page/3"] == 0
        assert project.stat("increcrawl/skipped/not_due") >= 1

        # Its slow re-check, still gone: nothing delivered, still gone.
        site.reset_counters()
        assert project.crawl(spider=spider, advance=120 * DAY) == []
        assert site.requested["/page/3"] == 1
        assert _gone(tmp_path, url)
        assert "Traceback" not in project.log

        # Back: its items are new again.
        site.restore(3)
        site.reset_counters()
        back = project.crawl("-a", "increcrawl_reset=1", spider=spider, advance=HOUR)
        assert {item["change"] for item in back if item["url"] == url} == {"new"}
        assert len([item for item in back if item["url"] == url]) == len(before)
        assert not _gone(tmp_path, url)


def test_a_spider_that_handles_404_itself_gets_its_response(tmp_path: Path) -> None:
    with SampleSite(pages=6) as site:
        project = Project(tmp_path, site)
        project.crawl()
        site.delete(3, linked=True)
        gone = project.crawl("-s", "HTTPERROR_ALLOW_ALL=True", advance=2 * DAY)
        # The callback ran on the 404 (its item has no title): no gone item of ours.
        assert "gone" not in {item["change"] for item in gone}
        assert [item["url"] for item in gone if item["title"] is None] == [site.page_url(3)]


def test_a_page_of_the_tutorial_spider_that_answers_410_is_gone(tmp_path: Path) -> None:
    """Scrapy's tutorial spider (a plain Spider, no errback; items without a URL
    field, kept under their page's URL)."""
    with QuotesSite(quotes=100) as site:
        project = QuotesProject(tmp_path, site, "quotes")
        assert len(project.crawl()) == 100
        site.delete_page(5, status=410)
        changes = project.crawl(advance=2 * DAY)
        assert site.requested["/page/5/"] == 1
        assert delivered(changes) == sorted(("gone", str(q["text"])) for q in site.quotes[40:50])
        assert {(item["author"], tuple(item["tags"])) for item in changes} == {
            (q["author"], tuple(q["tags"]))
            for q in site.quotes[40:50]  # type: ignore[arg-type]
        }
        assert project.stat("increcrawl/gone") == 1
        assert project.crawl(advance=HOUR) == []
        assert site.requested["/page/5/"] == 0
        assert "Traceback" not in project.log
