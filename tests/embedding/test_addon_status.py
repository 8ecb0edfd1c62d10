"""What ``scrapy increcrawl status`` and the run summary say of the add-on's runs
(#50, 11): each run's due pages as the schedule had them when it started (it said
``due 0`` after every add-on run), and what skipping replayed counted by the pages
the replays led to, not by every kept request of every skipped page (1,795
"replayed requests" on a 25-page site, most of them dropped as duplicates)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, HOUR, Project
from tests.support.process import run_process

pytestmark = pytest.mark.e2e


def _runs(project: Project) -> list[str]:
    """``scrapy increcrawl status``'s run lines, newest first, as a user reads them."""
    command = [
        sys.executable, "-m", "scrapy", "increcrawl", "status", "-s", f"INCRECRAWL_DB={project.db}"
    ]  # fmt: skip
    out = run_process(command, project.tmp).stdout
    return [line.strip() for line in out.splitlines() if re.match(r"\s+run \d+ ", line)]


def _due(line: str) -> int:
    found = re.search(r": due (\d+),", line)
    assert found, line
    return int(found[1])


def test_status_says_how_many_pages_each_add_on_run_had_due(tmp_path: Path) -> None:
    with QuotesSite(quotes=40) as site:  # four pages, each leading to the next
        project = Project(tmp_path, site, "pages")
        project.crawl()  # nothing known yet: nothing due
        project.crawl(advance=HOUR)  # nothing due
        site.edit(14, "\u201cEdited on page two.\u201d")
        project.crawl(advance=2 * DAY)  # every page due
        runs = _runs(project)
        assert [_due(line) for line in runs] == [4, 0, 0], runs
        assert "changed 1" in runs[0]


def test_the_summary_counts_the_pages_replays_lead_to(tmp_path: Path) -> None:
    with QuotesSite(quotes=40) as site:  # each page links the home page and the next
        project = Project(tmp_path, site, "pages")
        project.crawl()
        project.crawl(advance=HOUR)  # nothing due: each page skipped, its links replayed
        replayed = project.stat("increcrawl/replayed")
        assert replayed > 4  # each page's links to the home page among them
        assert project.stat("increcrawl/replayed_pages") == 4
        assert f"replayed {replayed} requests they led to (to 4 pages: " in project.log
