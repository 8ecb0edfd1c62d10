"""Items are the same item across runs only on evidence (issue #50, 7, 8 and 10):
a count ("one item and one item") is none; an item two listings list is one item;
an item's own edit is reported whatever happened to how pages' text is taken."""

from __future__ import annotations

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
