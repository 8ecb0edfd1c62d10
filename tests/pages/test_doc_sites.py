"""The add-on on real generators' sites (MkDocs, Sphinx) behind nginx, crawled as a
new user would: an ordinary ``CrawlSpider`` following every link from the home page,
``ADDONS`` and ``INCRECRAWL_SKIP_NOT_DUE`` only. A page's change is its own content,
as the ``incremental`` spider sees it, never the site's navigation; and a page the
site deleted is found gone although no link leads to it any more."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import lxml.html
import pytest
import pytest_twisted
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from tests.conftest import Clock
from tests.crawling import run_crawl
from tests.crawls.test_gone_pages_edges import add_on
from tests.servers import free_port, nginx, nginx_binary
from tests.support.generators import DocSite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

LATER = 200 * 86400.0  # every page due again


class DocsSpider(CrawlSpider):
    """What a user writes first: every link followed, a page's title and paragraphs."""

    name = "docs"

    def __init__(self, home: str = "", **kwargs: Any) -> None:
        # The site's own links only (a theme links to its project's home).
        own = LinkExtractor(allow=[re.escape(home)])
        self.rules = (Rule(own, callback="parse_page", follow=True),)
        super().__init__(**kwargs)
        self.start_urls = [home]

    def parse_page(self, response: Any) -> Any:
        title = response.css("h1::text").get()
        if not title or title.strip() in ("Home", "Example"):
            return  # the home page, a listing: only its links
        yield {
            "url": response.url,
            "title": title.strip(),
            "text": " ".join(response.css("[role=main] p ::text").getall()),
        }


def _available(generator: str) -> bool:
    try:
        __import__(generator)
    except ImportError:
        return False
    return True


@pytest.fixture(params=["mkdocs", "sphinx"])
def served(request: Any, tmp_path: Path):
    generator = request.param
    if not _available(generator):
        if os.environ.get("CI") == "true":
            pytest.fail(f"{generator} is not installed")
        pytest.skip(f"{generator} is not installed")
    port = free_port()
    site = DocSite(generator, tmp_path / "site", f"http://127.0.0.1:{port}", pages=16)
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port):
        yield site


class Docs:
    """The project's crawls of *site*: the README's two lines, a state of its own."""

    def __init__(self, site: DocSite, tmp_path: Path, clock: Clock) -> None:
        self.site, self.clock = site, clock
        self.db = str(tmp_path / "state.sqlite")
        self.settings = add_on(self.db, clock, LOG_LEVEL="INFO")

    async def crawl(self, later: float = 0) -> Any:
        """A crawl, *later* seconds after the last."""
        self.clock.advance(later)
        return await run_crawl(
            self.settings, spider_class=DocsSpider, home=f"{self.site.base_url}/"
        )


def intervals(db: str) -> dict[str, float]:
    with sqlite3.connect(db) as connection:
        return dict(connection.execute("SELECT url, interval_s FROM pages"))


def summary(log: list[str]) -> str:
    """The run summary: its record (the log's records are whole, lines and all)."""
    return next(line for line in reversed(log) if "Run summary for" in line)


@pytest_twisted.ensureDeferred
async def test_a_new_page_in_every_pages_navigation_is_no_change_of_theirs(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    site, docs = served, Docs(served, tmp_path, clock)
    db = docs.db
    first = await docs.crawl()
    assert first.changes("new") == set(site.urls())
    # The pages of items (the home page and indexes are listings: pages/listings.py).
    before = {url: interval for url, interval in intervals(db).items() if url in site.urls()}

    # A page added (every page's navigation lists it) and one edited.
    added = site.add_page()
    site.edit_page("topic-004")
    site.build()
    second = await docs.crawl(LATER)
    assert second.changes("new") == {site.url_of(added)}
    assert second.changes("changed") == {site.url_of("topic-004")}
    # The pages changed are the ones the feed holds, whatever their navigation did;
    # and the listings whose links changed (the new page's), whose schedules follow.
    listed = {
        change: second.stats.get(f"increcrawl/pages/listings/{change}", 0)
        for change in ("new", "changed", "unchanged")
    }
    assert listed["changed"] + listed["unchanged"] >= 1, summary(second.log)  # the home
    assert second.stats.get("increcrawl/changed", 0) == 1 + listed["changed"]
    assert second.stats.get("increcrawl/new", 0) == 1 + listed["new"]
    assert second.stats["increcrawl/unchanged"] == len(site.urls()) - 2 + listed["unchanged"]
    # An unchanged page's interval is not cut by the change of its template.
    after = intervals(db)
    cut = [url for url in before if url != site.url_of("topic-004") and after[url] < before[url]]
    assert cut == []

    # A new footer and theme: every page's template moved, none of their content.
    site.footer_year += 1
    site.build()
    third = await docs.crawl(LATER)
    assert third.items == []
    assert third.stats.get("increcrawl/changed", 0) == 0, summary(third.log)  # listings too


@pytest_twisted.ensureDeferred
async def test_a_page_no_link_leads_to_any_more_is_checked_directly_and_gone(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    site, docs = served, Docs(served, tmp_path, clock)
    db = docs.db
    await docs.crawl()
    deleted = site.url_of("topic-007")
    site.remove_page("topic-007")  # and every page's navigation link to it
    site.build()
    for _ in range(2):  # runs 2 and 3 do not reach it: no request for it, nothing said yet
        done = await docs.crawl(LATER)
        assert done.changes("gone") == set()
        assert "1 not reached by this run (no response led to them" in summary(done.log)
        # The operator is told which page the crawl no longer reaches.
        assert deleted in status(db)
        assert [seed["unreached"] for seed in report(db, tmp_path / "report.html")] == [[deleted]]
    # The third run that does not reach it asks for it directly: gone.
    fourth = await docs.crawl(LATER)
    assert fourth.changes("gone") == {deleted}
    assert fourth.stats["increcrawl/unreached/checked"] == 1
    assert fourth.stats["increcrawl/gone"] == 1
    assert deleted not in status(db)
    fifth = await docs.crawl(LATER)
    assert fifth.items == [] and "increcrawl/unreached/checked" not in fifth.stats


def report(db: str, out: Path) -> list[dict[str, Any]]:
    """The HTML report's data of the state's seeds (what its page shows)."""
    command = [sys.executable, "-m", "scrapy", "increcrawl", "report", "-o", str(out)]
    done = subprocess.run(
        [*command, "-s", f"INCRECRAWL_DB={db}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(db).parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    island = lxml.html.parse(str(out)).getroot().get_element_by_id("report-data").text
    return json.loads(island)["seeds"]


def status(db: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "scrapy", "increcrawl", "status", "-s", f"INCRECRAWL_DB={db}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(db).parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
