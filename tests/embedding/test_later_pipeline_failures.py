"""examples/quotes through the add-on: a change the project's own storage failed on
is delivered the next run, for each of its spider shapes, skipping or not."""

from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, HOUR, Project

pytestmark = pytest.mark.e2e


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
