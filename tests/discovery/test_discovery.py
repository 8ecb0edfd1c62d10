from __future__ import annotations

import gzip

import pytest

from increcrawl_scrapy.discovery.parse import (
    SitemapError,
    SitemapStats,
    decompress,
    iter_sitemap,
    robots_sitemaps,
)

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def read(xml: str) -> tuple[list[tuple[str, str | None]], SitemapStats]:
    stats = SitemapStats()
    return [(e.loc, e.lastmod) for e in iter_sitemap(xml.encode(), stats)], stats


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2024", "2024-01-01T00:00:00Z"),
        ("2024-05", "2024-05-01T00:00:00Z"),
        ("2024-05-06", "2024-05-06T00:00:00Z"),
        ("2024-05-06T07:08Z", "2024-05-06T07:08:00Z"),
        ("2024-05-06T07:08:09+00:00", "2024-05-06T07:08:09Z"),
        ("2024-05-06T07:08:09Z", "2024-05-06T07:08:09Z"),
        ("2024-05-06T07:08:09.5+02:00", "2024-05-06T05:08:09.500000Z"),
        ("2024-05-06T01:00:00-03:30", "2024-05-06T04:30:00Z"),
        ("  2024-05-06  ", "2024-05-06T00:00:00Z"),
        ("2024-02-30", None),
        ("2024-02-30T00:00:00Z", None),
        ("2024-13-01", None),
        ("yesterday", None),
        ("2024-05-06T25:00:00Z", None),
    ],
)
def test_lastmod_forms(raw: str, expected: str | None) -> None:
    url = f"<url><loc>https://a.com/x</loc><lastmod>{raw}</lastmod></url>"
    entries, stats = read(f"<urlset {NS}>{url}</urlset>")
    assert entries == [("https://a.com/x", expected)]
    assert stats.skipped["bad_lastmod"] == (1 if expected is None else 0)


def test_urlset_index_namespaces_and_whitespace() -> None:
    entries, stats = read(
        f"<urlset {NS}><url><loc>\n  https://a.com/1 \n</loc></url>"
        "<url><lastmod>2024</lastmod></url></urlset>"
    )
    assert entries == [("https://a.com/1", None)] and stats.kind == "urlset"
    assert stats.skipped["no_loc"] == 1
    entries, stats = read(
        "<sitemapindex><sitemap><loc>https://a.com/s1.xml</loc></sitemap></sitemapindex>"
    )
    assert entries == [("https://a.com/s1.xml", None)] and stats.kind == "sitemapindex"
    entries, _ = read(
        '<urlset xmlns="http://example.com/wrong"><url><loc>https://a.com/2</loc></url></urlset>'
    )
    assert entries == [("https://a.com/2", None)]


def test_image_loc_does_not_replace_the_page_loc() -> None:
    xml = (
        f'<urlset {NS} xmlns:image="http://www.google.com/schemas/sitemap-image/1.1"><url>'
        "<loc>https://a.com/page</loc><image:image><image:loc>https://a.com/i.png</image:loc>"
        "</image:image></url></urlset>"
    )
    assert read(xml)[0] == [("https://a.com/page", None)]


def test_not_a_sitemap_and_broken_xml() -> None:
    with pytest.raises(SitemapError, match="not a sitemap"):
        read("<html><body><url><loc>https://a.com/</loc></url></body></html>")
    with pytest.raises(SitemapError, match="not a sitemap"):
        read("<html><body>hi</body></html>")
    stats = SitemapStats()
    broken = f"<urlset {NS}><url><loc>https://a.com/1</loc></url><url><loc>"
    seen = [entry.loc for entry in iter_sitemap(broken.encode(), stats)]
    assert seen == ["https://a.com/1"]  # what came before the cut, once
    assert stats.recovered and stats.truncated
    # Cut inside a URL: never stored as a shorter URL.
    cut = f"<urlset {NS}><url><loc>https://a.com/1</loc></url><url><loc>https://a.com/produ"
    stats = SitemapStats()
    assert [entry.loc for entry in iter_sitemap(cut.encode(), stats)] == ["https://a.com/1"]
    assert stats.skipped["truncated"] == 1
    with pytest.raises(SitemapError, match="not a sitemap"):
        read("<html><body><p>unclosed & broken<p></body>")


def test_entities_are_never_resolved(tmp_path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    xml = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file://{secret}">]>'
        f"<urlset {NS}><url><loc>https://a.com/&x;</loc></url>"
        f"<url><loc>https://a.com/safe</loc></url></urlset>"
    )
    entries, _ = read(xml)
    assert all("TOPSECRET" not in loc for loc, _ in entries)
    assert ("https://a.com/safe", None) in entries  # the safe entry was still read


def test_decompress_limits() -> None:
    small = gzip.compress(b"<urlset/>")
    assert decompress(small, 1024) == b"<urlset/>"
    with pytest.raises(SitemapError, match="too large"):
        decompress(gzip.compress(b" " * 10_000), 1024)
    with pytest.raises(SitemapError, match="over the limit"):
        decompress(b" " * 2048, 1024)


def test_robots_sitemaps() -> None:
    text = "User-agent: *\nDisallow: /x\nSitemap: https://a.com/s1.xml\nsitemap: https://a.com/s2.xml.gz\n"
    assert robots_sitemaps(text.encode()) == ["https://a.com/s1.xml", "https://a.com/s2.xml.gz"]


def test_recovery_expands_no_entity_either(tmp_path) -> None:
    """The forgiving reading (here forced by a bare ``&``) keeps the guarantees."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    xxe = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file://{secret}">]>'
        f"<urlset {NS}><url><loc>https://a.com/&x;</loc></url>"
        f"<url><loc>https://a.com/?a=1&b=2</loc></url></urlset>"
    )
    stats = SitemapStats()
    entries = [entry.loc for entry in iter_sitemap(xxe.encode(), stats)]
    assert stats.recovered and entries == ["https://a.com/?a=1&b=2"]
    assert stats.skipped["entity"] == 1
    laughs = "".join(
        f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10 if i else "lol"}">' for i in range(10)
    )
    bomb = (
        f'<?xml version="1.0"?><!DOCTYPE u [{laughs}]><urlset {NS}>'
        f"<url><loc>https://a.com/&l9;</loc></url><url><loc>https://a.com/?a&b</loc></url>"
        "</urlset>"
    )
    stats = SitemapStats()
    entries = [entry.loc for entry in iter_sitemap(bomb.encode(), stats)]
    assert stats.recovered and entries == ["https://a.com/?a&b"]
    assert all(len(loc) < 100 for loc in entries)
