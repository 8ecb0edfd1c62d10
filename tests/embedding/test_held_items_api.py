"""Pages fetched through the Geonode API (its downloader middleware answers them,
Scrapy's downloader never sees them) count for a run's completeness as direct ones
(``pages/answers.py``): a page whose origin answered 503 through the API, or whose
API call failed, was not seen, and an item that moved there is not delivered gone
(#50, second review D2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.embedding.quotes_project import DAY, KEY, Project, delivered

pytestmark = pytest.mark.e2e

#: The API's own retries, quick: a call that keeps failing is retried out soon.
QUICK = ("-s", "GEONODE_MAX_RETRIES=1", "-s", "GEONODE_BACKOFF_BASE=0.01")


def _fail_page_six(site: QuotesSite, api: GeonodeStandIn, how: str) -> None:
    if how == "origin 503":  # the API answers 200, the origin's 503 in its metadata
        site.delete_page(6, status=503)
    elif how == "origin 503 as an API error":  # a 422 naming the origin's 503
        site.delete_page(6, status=503)
        api.configure(origin_status_mode="error")
    else:  # the API itself fails for that page, at every try: retried out
        api.inject("500", count=100, url=site.page_url(6))


@pytest.mark.parametrize("how", ["origin 503", "origin 503 as an API error", "API 500 retried out"])
def test_a_page_that_failed_through_the_api_keeps_held_items(tmp_path: Path, how: str) -> None:
    with QuotesSite(quotes=60) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        project = Project(tmp_path, site, "quotes", api=api)
        assert len(project.crawl(*QUICK)) == 60
        # A quote leaves page two for page six (a new one in its place; page six's
        # last quote replaced by it).
        moved = site.delete(12)
        site.insert(12, "\u201cNew on page two.\u201d")
        with site._lock:
            replaced = site.quotes[59]
            site.quotes[59] = moved
        _fail_page_six(site, api, how)
        # Every page due; page six not seen: the quote that left page two is held.
        second = delivered(project.crawl(*QUICK, advance=2 * DAY))
        assert second == [("new", "\u201cNew on page two.\u201d")]
        if how.startswith("API"):  # the client's try and its retry, then an error
            assert api.counters()["faults"] == {"500": 2}
        else:  # Scrapy retried the origin's 503 twice, through the API
            assert site.requested["/page/6/"] == 3
        assert "Idle, but 1 pages asked did not answer usably" in project.log
        # Page six answers again: the quote moved there, nothing of it delivered.
        site.restore_page(6)
        api.configure(origin_status_mode="metadata")
        api.clear_faults()
        third = delivered(project.crawl(*QUICK, advance=2 * DAY))
        assert third == [("gone", str(replaced["text"]))]
        assert project.stat("increcrawl/items/moved") == 1
