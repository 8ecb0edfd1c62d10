"""A declared key (INCRECRAWL_ITEM_KEY) is the item's identity across the site
(issue #50, 7 and 8): it is gone only when no page of the site lists it any more,
and a state an earlier version kept (its rows under their pages) loses no deletion
and invents no change."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from increcrawl_scrapy.pages.memory import unpack
from increcrawl_scrapy.testing.quotes import PER_PAGE, QuotesSite
from tests.embedding.quotes_project import DAY, Project, delivered

pytestmark = pytest.mark.e2e

KEYED = ("-s", "INCRECRAWL_ITEM_KEY=text")


def test_a_key_another_page_still_lists_is_not_gone(tmp_path: Path) -> None:
    # Quote X is listed on page two and on page three. Page two drops it; page three,
    # unchanged, answers 304 (not read again: its memory still lists X). X is not
    # gone; once page three drops it too, it is, once.
    with QuotesSite(quotes=30) as site:
        with site._lock:
            site.quotes[25] = dict(site.quotes[12])  # X on page two and page three
        x = str(site.quotes[12]["text"])
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl(*KEYED)) == 29  # X once: one key, one item
        site.delete(12)
        site.insert(12, "\u201cNew on page two.\u201d")
        changes = project.crawl(*KEYED, advance=2 * DAY)
        assert site.not_modified.get("/page/3/") == 1  # page three was not read again
        assert delivered(changes) == [("new", "\u201cNew on page two.\u201d")]
        assert project.crawl(*KEYED, advance=2 * DAY) == []
        assert site.delete(25)["text"] == x  # page three drops X too: gone, once
        seen: list[tuple[str, str]] = []
        for _ in range(6):  # until page three is due and read again
            seen += delivered(project.crawl(*KEYED, advance=4 * DAY))
            if site.requested.get("/page/3/", 0) > site.not_modified.get("/page/3/", 0):
                break
        seen += delivered(project.crawl(*KEYED, advance=4 * DAY))
        assert seen == [("gone", x)]


def _as_kept_by_a762710(db: str, site: QuotesSite) -> None:
    """The state as the previous version (a762710) keeps it, made of this one's first
    run: each key's row under the page that lists it (``PAGE#item:KEY``; the root
    page's keys are already so named), and its pages' memories without prints of
    their items (it printed none with a key), no lists of the pages a key is on."""
    texts = [str(quote["text"]) for quote in site.quotes]
    with sqlite3.connect(db) as con:
        rows = [row[0] for row in con.execute("SELECT normalized_url FROM pages")]
        root = min(url for url in rows if "#item:" not in url)
        for url in rows:
            if "#item:" not in url:
                continue
            text = url.split("#item:text=", 1)[1]
            page = texts.index(text) // PER_PAGE + 1
            if page > 1:
                con.execute(
                    "UPDATE pages SET normalized_url = ? WHERE normalized_url = ?",
                    (f"{root}page/{page}#item:text={text}", url),
                )
        con.execute("DELETE FROM memories WHERE normalized_url LIKE '%#listed:%'")
        for key, body in list(con.execute("SELECT normalized_url, body FROM memories")):
            memory = unpack(bytes(body))
            if memory is None:
                continue
            memory.items = []
            con.execute(
                "UPDATE memories SET body = ? WHERE normalized_url = ?", (memory.pack(), key)
            )


def test_an_upgraded_state_says_a_keyed_deletion_and_no_move(tmp_path: Path) -> None:
    # A state the previous version kept, then one quote deleted: the quotes after it
    # move a place up (page three's first onto page two). The deleted one is `gone`,
    # once; the one that moved is the same item, not `new`; nothing else is said.
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        assert len(project.crawl(*KEYED)) == 30
        _as_kept_by_a762710(project.db, site)
        removed = site.delete(12)
        seen = []
        for _ in range(3):
            seen += delivered(project.crawl(*KEYED, advance=2 * DAY))
        assert seen == [("gone", removed["text"])]
