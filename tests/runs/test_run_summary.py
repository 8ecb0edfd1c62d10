"""The run summary's lines, from a crawl's stats (the crawls themselves are in
test_production_logs.py and the command tests)."""

from __future__ import annotations

from increcrawl_scrapy import stats
from increcrawl_scrapy.crawl.run_summary import run_summary


def summary(values: dict[str, int], **kwargs) -> str:
    kwargs.setdefault("listed", 0)
    return run_summary(
        lambda key, default=None: values.get(key, default),
        seed="https://example.org/sitemap.xml",
        reason="finished",
        **kwargs,
    )


def test_one_of_a_kind_is_said_in_the_singular() -> None:
    text = summary(
        {
            stats.DISCOVERED: 1,
            stats.SITEMAP_UNCHANGED: 1,
            stats.DUE: 1,
            stats.ERRORS: 1,
            stats.API_REQUESTS: 1,
            stats.API_TOKENS: 1,
            stats.HYBRID_PROBES: 1,
            stats.HYBRID_SAVED: 1,
        },
        listed=1,
    )
    assert "discovered 1 URL (1 sitemap unchanged since its last read); 1 page due" in text
    assert "1 fetched: 0 new, 0 changed, 0 unchanged, 0 gone, 1 error\n" in text
    assert "Geonode: 1 request, 1 token charged" in text
    assert "hybrid: 1 direct probe (free), 1 of them answered" in text
    assert "fetched 1 of 1 listed page (as many as fetching them all)" in text


def test_many_are_said_in_the_plural() -> None:
    text = summary(
        {stats.DISCOVERED: 1200, stats.SITEMAP_UNCHANGED: 2, stats.DUE: 3, stats.NEW: 3},
        listed=1200,
    )
    assert "discovered 1,200 URLs (2 sitemaps unchanged since their last read); 3 pages due" in text
    assert "3 fetched: 3 new, 0 changed, 0 unchanged, 0 gone, 0 errors\n" in text
    assert "fetched 3 of 1,200 listed pages (400.0x fewer than fetching them all)" in text


def test_a_projects_own_spider_in_the_singular() -> None:
    text = summary(
        {
            stats.NEW: 1,
            stats.SKIPPED.format(reason="not_due"): 1,
            stats.REPLAYED: 1,
            stats.ITEMS_UNCHANGED: 1,
        },
        listed=3,
        embedded=True,
    )
    assert "skipped 1 page not due and 0 not modified (304), replayed 1 request" in text
    assert "; 1 unchanged item not delivered" in text
    assert "reached 2 of the 3 pages with state (1 fetched, 1 skipped)" in text


def test_replayed_requests_are_told_from_the_pages_they_lead_to() -> None:
    # A docs site's every page links every other: 25 skipped pages replay 1,795
    # requests, most of them repeats Scrapy's duplicate filter drops (#50, 11).
    text = summary(
        {
            stats.SKIPPED.format(reason="not_due"): 25,
            stats.REPLAYED: 1795,
            stats.REPLAYED_PAGES: 26,
        },
        listed=25,
        embedded=True,
    )
    assert (
        "replayed 1,795 requests they led to (to 26 pages: Scrapy's duplicate filter "
        "drops the repeats)" in text
    )


def test_a_projects_own_spider_lists_nothing() -> None:
    # A project's own spider has no sitemap: its pages are the pages with state.
    text = summary({stats.SKIPPED.format(reason="not_due"): 6}, listed=6, embedded=True)
    assert "fetched 0 of 6 pages with state (none at all)" in text
    assert "listed" not in text
    one = summary({stats.NEW: 1}, listed=1, embedded=True)
    assert "fetched 1 of 1 page with state (as many as fetching them all)" in one
    more = summary({stats.NEW: 3}, listed=2, embedded=True)
    assert "fetched 3 pages, more than the 2 with state" in more and "listed" not in more


def test_a_projects_own_spider_whose_pages_answered_304_says_so() -> None:
    # Every page fetched answered 304 and led nowhere: the line that says what the
    # conditional requests spared was left out.
    text = summary(
        {stats.UNCHANGED: 4, stats.SKIPPED.format(reason="not_modified"): 4},
        listed=4,
        embedded=True,
    )
    assert "skipped 0 pages not due and 4 not modified (304), replayed 0 requests" in text
