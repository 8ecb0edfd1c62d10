"""Items are the same item across runs only on evidence (issue #50, 7, 8 and 10):
a count ("one item and one item") is none; an item two listings list is one item;
an item's own edit is reported whatever happened to how pages' text is taken."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, Project, delivered

pytestmark = pytest.mark.e2e


def test_one_item_and_one_item_is_no_evidence(tmp_path: Path) -> None:
    # The last page holds one quote. One deleted on the first page, one added at the
    # end: every quote after the deleted one moves a place up, the last page's one
    # onto page two, and the last page holds the added one. It is not the quote that
    # was there before (nothing says so but their count): the truth is one gone and
    # one new, nothing else.
    with QuotesSite(quotes=21) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl()) == 21
        removed = site.delete(5)
        site.add(1)
        added = site.quotes[-1]
        changes = project.crawl(advance=2 * DAY)
        assert delivered(changes) == [("gone", removed["text"]), ("new", added["text"])]
        assert project.stat("increcrawl/items/moved") == 2  # pages 2-1 and 3-2
        assert project.crawl(advance=2 * DAY) == []


def test_keys_an_earlier_version_kept_under_their_page_are_not_new(tmp_path: Path) -> None:
    # INCRECRAWL_ITEM_KEY on items without a URL field: an earlier version kept each
    # key's row under its page (PAGE#item:KEY), now under the site. The upgrade takes
    # the page's row as the key's last state: of a page read again, only what
    # changed is delivered (it was every item of it `new`).
    keyed = ("-s", "INCRECRAWL_ITEM_KEY=text")
    with QuotesSite(quotes=20) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl(*keyed)) == 20
        with sqlite3.connect(project.db) as con:
            pages = [row[0] for row in con.execute("SELECT normalized_url FROM pages")]
            first, second = sorted(url for url in pages if "#item:" not in url)
            for url in pages:
                if "#item:" not in url:
                    continue
                text = url.split("#item:text=", 1)[1]
                at = [quote["text"] for quote in site.quotes].index(text)
                page = first if at < 10 else second
                con.execute(
                    "UPDATE pages SET normalized_url = ? WHERE normalized_url = ?",
                    (f"{page}#item:text={text}", url),
                )
        old = site.quotes[13]["text"]
        site.edit(13, "\u201cEdited on page two.\u201d")  # page two is read again
        changes = project.crawl(*keyed, advance=40 * DAY)
        assert delivered(changes) == [("gone", old), ("new", "\u201cEdited on page two.\u201d")]
