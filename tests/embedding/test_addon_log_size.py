"""The add-on logs no more than the spider it is added to (#50, 12): at INFO, a
25-page run's log is Scrapy's own lines plus a fixed few of the add-on's (its
middlewares in Scrapy's lists, its run summary, its stats), nothing a request, a
page or an item (its per-request detail is DEBUG). Measured: 4.8 KB for the first
run and 5.4 KB for a run with edits, against the spider's 4.1 KB; the bound, twice
the spider's log, leaves room for a longer summary and still fails at one line a
page (25 lines of 100 characters on top would do)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, Project

pytestmark = pytest.mark.e2e

INFO = ("-s", "LOG_LEVEL=INFO")
RECORD = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[", re.MULTILINE)


def test_an_add_on_run_logs_at_info_what_the_spider_alone_logs(tmp_path: Path) -> None:
    with QuotesSite(quotes=250) as site:  # 25 pages of ten quotes
        (tmp_path / "alone").mkdir()
        alone = Project(tmp_path / "alone", site, "quotes")
        assert len(alone.crawl(*INFO, "-s", "ADDONS={}")) == 250
        spider_log = alone.log
        (tmp_path / "addon").mkdir()
        project = Project(tmp_path / "addon", site, "quotes")
        first = project.crawl(*INFO)
        assert len(first) == 250
        logs = [project.log]
        site.edit(14, "\u201cAn edited quote.\u201d")
        site.delete(120)  # every quote after it moves up a place, across 13 pages
        site.add(3)
        assert len(project.crawl(*INFO, advance=2 * DAY)) == 5
        logs.append(project.log)
        for log in logs:
            assert len(log) < 2 * len(spider_log), (len(log), len(spider_log), log[-3000:])
            # Not a record a page: the spider's records and a fixed few.
            assert len(RECORD.findall(log)) <= len(RECORD.findall(spider_log)) + 5, log
