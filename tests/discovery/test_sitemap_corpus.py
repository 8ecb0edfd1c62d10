"""Real-world shapes of sitemaps and feeds (tests/discovery/sitemap_corpus/), each with a
hand-written expected list of URLs: the reader finds exactly those, in order, no
more (a wrong URL, such as one cut by an entity, would be a miss, not a gain).
``benchmarks/sitemap_corpus.py`` reads the same documents with Scrapy's
``SitemapSpider`` parser and ultimate-sitemap-parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from increcrawl_scrapy.discovery.parse import SitemapError, SitemapStats, decompress, iter_sitemap

CORPUS = Path(__file__).parent / "sitemap_corpus"
EXPECTED: dict[str, list[str]] = json.loads((CORPUS / "expected.json").read_text())


def ours(body: bytes) -> tuple[list[str], SitemapStats]:
    stats = SitemapStats()
    try:
        found = [e.loc for e in iter_sitemap(decompress(body, 50 << 20), stats) if not e.alternate]
    except SitemapError:
        return [], stats
    return found, stats


def test_the_corpus_is_large_enough() -> None:
    assert len(EXPECTED) >= 30
    assert sorted(EXPECTED) == sorted(p.name for p in CORPUS.iterdir() if p.suffix != ".json")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_document_yields_exactly_the_expected_urls(name: str) -> None:
    found, stats = ours((CORPUS / name).read_bytes())
    assert found == EXPECTED[name]
    if name.startswith(("20-", "21-", "22-", "24-", "25-")):
        assert stats.recovered  # read the forgiving way, and said so
    if name.startswith("25-"):
        assert stats.truncated
    if name.startswith("26-"):
        assert stats.skipped["entity"] == 2


def test_dates_of_feeds_and_news() -> None:
    def dates(name: str) -> list[str | None]:
        body = decompress((CORPUS / name).read_bytes(), 50 << 20)
        return [entry.lastmod for entry in iter_sitemap(body, SitemapStats())]

    assert dates("15-wordpress-rss2.xml") == ["2025-05-02T09:14:11Z", "2025-01-10T08:00:00Z"]
    # Atom: updated before published.
    assert dates("16-atom.xml") == ["2003-12-13T18:30:02Z", "2003-12-15T09:00:00Z"]
    assert dates("18-rss1-rdf.xml") == ["2025-05-01T10:00:00Z", None]
    # News: the publication date stands in for a missing lastmod.
    assert dates("12-google-news.xml") == ["2008-12-23T00:00:00Z", "2008-12-24T07:30:00Z"]
    assert dates("01-protocol-urlset.xml")[0] == "2005-01-01T00:00:00Z"


def test_alternates_are_yielded_marked() -> None:
    body = (CORPUS / "10-hugo-multilingual.xml").read_bytes()
    entries = list(iter_sitemap(body, SitemapStats()))
    alternates = [entry.loc for entry in entries if entry.alternate]
    assert alternates == [
        "https://example.com/fr/posts/bonjour/",
        "https://example.com/en/posts/hello/",
    ]
