"""The add-on's run summary says what the feed got: its items by the feed's labels,
beside its pages (a page of ten quotes is one page and ten items). Before, the
summary counted pages only ("2 changed" where the feed had one changed item, five
new and one gone), as if they were the items."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, Project

pytestmark = pytest.mark.e2e


def _summary(log: str) -> list[str]:
    lines = log.splitlines()
    at = max(i for i, line in enumerate(lines) if "Run summary for" in line)
    return [line.strip() for line in lines[at + 1 :] if line.startswith("  ")]


def test_the_summary_counts_the_items_the_feed_got(tmp_path: Path) -> None:
    with QuotesSite(quotes=100) as site:
        project = Project(tmp_path, site, "quotes")
        first = project.crawl()
        assert len(first) == 100
        summary = _summary(project.log)
        assert "items delivered: 100 new, 0 changed, 0 gone" in summary

        site.edit(14, "\u201cAn edited quote.\u201d")
        site.delete(99)
        site.add(5)
        changes = project.crawl(advance=2 * DAY)
        feed = Counter(item["change"] for item in changes)
        assert feed == {"new": 5, "changed": 1, "gone": 1}
        summary = _summary(project.log)
        assert "items delivered: 5 new, 1 changed, 1 gone" in summary
        # The pages' line says it counts pages.
        assert any(line.startswith("11 pages fetched: ") for line in summary), summary


def test_items_not_delivered_are_named_in_the_log_not_dumped(tmp_path: Path) -> None:
    """The add-on's minimal setup logs at Scrapy's default DEBUG: an unchanged item
    it drops is one line naming it, not the whole item (two thirds of a later run's
    log were unchanged items dumped field by field). The project's own items are
    logged as Scrapy logs them."""
    with QuotesSite(quotes=30) as site:
        project = Project(tmp_path, site, "quotes")
        project.crawl()
        assert project.log.count("Scraped from <200") == 30
        assert "'author':" in project.log  # the project's items, as Scrapy logs them
        site.edit(14, "\u201cAn edited quote.\u201d")
        assert len(project.crawl(advance=2 * DAY)) == 1
        lines = project.log.splitlines()
        dropped = [i for i, line in enumerate(lines) if "Dropped: " in line]
        assert len(dropped) == project.stat("increcrawl/items/unchanged") == 9
        # Each on its own line: the next line starts a log record of its own.
        assert all(lines[i + 1][:4].isdigit() for i in dropped), lines[dropped[0] + 1]
