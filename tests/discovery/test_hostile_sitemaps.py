"""Hostile and broken sitemaps, read by whole crawls: a warning and a stat, never a
crash, an off-site fetch or a file read."""

from __future__ import annotations

import gzip
import sqlite3
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.discovery.after import NOT_THE_SEEDS
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import CrawlResult, crawl_settings, run_crawl

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*locs: str) -> bytes:
    return (
        f"<urlset {NS}>{''.join(f'<url><loc>{loc}</loc></url>' for loc in locs)}</urlset>".encode()
    )


async def crawl_sitemap(
    site: SampleSite, tmp_path: Path, clock: Clock, body: bytes, **settings: object
) -> tuple[CrawlResult, list[str]]:
    url = site.serve("/hostile.xml", body)
    db = tmp_path / "h.sqlite"
    result = await run_crawl(crawl_settings(str(db), clock, **settings), sitemap_url=url)
    # a sitemap refused whole is a discovery that read nothing (exit code 3), and
    # one whose every URL was refused kept nothing (exit code 3 too)
    read = result.stats.get("increcrawl/sitemaps")
    refused = any(
        k.rpartition("/")[2] in NOT_THE_SEEDS
        for k in result.stats
        if k.startswith("increcrawl/sitemap/skipped/")
    )
    kept = result.stats.get("increcrawl/discovered")
    expected = "discovery_failed" if not read else "finished"
    if read and refused and not kept:
        expected = "nothing_discovered"
    assert result.reason == expected
    rows = [r[0] for r in sqlite3.connect(db).execute("SELECT normalized_url FROM pages")]
    return result, rows


def warned(result: CrawlResult) -> bool:
    return any(line.startswith("WARNING") for line in result.log)


@pytest_twisted.ensureDeferred
async def test_external_entities_are_not_read(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    body = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file://{secret}">]>'
        f"<urlset {NS}><url><loc>{site.page_url(1)}?q=&x;</loc></url>"
        f"<url><loc>{site.page_url(2)}</loc></url></urlset>"
    ).encode()
    result, rows = await crawl_sitemap(site, tmp_path, clock, body)
    assert "TOPSECRET" not in repr(rows) + repr(result.items)
    assert b"TOPSECRET" not in (tmp_path / "h.sqlite").read_bytes()
    assert site.page_url(2) in rows  # the safe entry was still discovered


@pytest_twisted.ensureDeferred
async def test_billion_laughs(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    entities = '<!ENTITY a0 "ha">' + "".join(
        f'<!ENTITY a{i} "{f"&a{i - 1};" * 10}">' for i in range(1, 10)
    )
    body = (
        f'<?xml version="1.0"?><!DOCTYPE u [{entities}]>'
        f"<urlset {NS}><url><loc>{site.page_url(2)}</loc></url>"
        f"<url><loc>{site.page_url(1)}?&a9;</loc></url></urlset>"
    ).encode()
    result, rows = await crawl_sitemap(site, tmp_path, clock, body)
    assert all(len(row) < 200 for row in rows)  # never expanded
    assert result.stats.get("increcrawl/discovered", 0) <= 2
    assert site.page_url(2) in rows  # the safe entry was still discovered


@pytest_twisted.ensureDeferred
async def test_gzip_bomb(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * (20 * 1024 * 1024) + b"</urlset>")
    assert len(bomb) < 100_000
    result, rows = await crawl_sitemap(
        site, tmp_path, clock, bomb, INCRECRAWL_SITEMAP_MAX_BYTES=1024 * 1024
    )
    assert rows == [] and warned(result)
    assert result.stats["increcrawl/sitemap/invalid"] == 1


@pytest_twisted.ensureDeferred
async def test_a_60_mb_sitemap_is_over_the_default_limit(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    entry = f"<url><loc>{site.page_url(1)}</loc></url>".encode()
    big = b"<urlset>" + entry * (60 * 1024 * 1024 // len(entry)) + b"</urlset>"
    assert len(big) > 60_000_000
    result, rows = await crawl_sitemap(site, tmp_path, clock, big)
    assert rows == [] and warned(result)
    assert result.stats["increcrawl/sitemap/errors"] == 1  # the download itself was cut


@pytest.mark.parametrize(
    ("name", "body"),
    [
        ("malformed", b"<urlset><url><loc>http://x/</loc></url><url><loc>"),
        ("not xml", b"\x00\x01 definitely not xml"),
        ("html", b"<html><body><a href='/page/1'>x</a></body></html>"),
        (
            "invalid utf-8",
            b'<?xml version="1.0" encoding="utf-8"?><urlset><url><loc>\xff\xfe</loc></url>',
        ),
    ],
)
@pytest_twisted.ensureDeferred
async def test_broken_documents(
    site: SampleSite, tmp_path: Path, clock: Clock, name: str, body: bytes
) -> None:
    result, _ = await crawl_sitemap(site, tmp_path, clock, body)
    assert warned(result), name
    assert result.stats["increcrawl/discovery_incomplete"] == 1


@pytest_twisted.ensureDeferred
async def test_odd_but_usable_documents(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    body = (
        "\ufeff<urlset xmlns='http://wrong.example/ns'>"
        f"<url><loc>\n   {site.page_url(1)}   \n</loc></url>"
        f"<url><loc>{site.page_url(2)}</loc><lastmod>garbage</lastmod></url></urlset>"
    ).encode()
    result, rows = await crawl_sitemap(site, tmp_path, clock, body)
    assert sorted(rows) == sorted([site.page_url(1), site.page_url(2)])
    assert result.stats["increcrawl/sitemap/skipped/bad_lastmod"] == 1


@pytest_twisted.ensureDeferred
async def test_entries_out_of_scope_are_skipped_and_counted(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    body = urlset(
        site.page_url(1),
        "https://other.example/x",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/html,hi",
        site.page_url(2) + "?" + "x" * 2100,
    )
    result, rows = await crawl_sitemap(site, tmp_path, clock, body)
    assert rows == [site.page_url(1)]
    skipped = {k.rsplit("/", 1)[1]: v for k, v in result.stats.items() if "/skipped/" in k}
    assert skipped == {"offsite": 1, "bad_scheme": 3, "too_long": 1}
    assert {item["url"] for item in result.items} == {site.page_url(1)}


@pytest_twisted.ensureDeferred
async def test_duplicates_are_one_row(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    result, rows = await crawl_sitemap(site, tmp_path, clock, urlset(*[site.page_url(3)] * 100_000))
    assert rows == [site.page_url(3)]
    assert len(result.items) == 1


@pytest_twisted.ensureDeferred
async def test_an_index_that_points_to_itself_or_nests_too_deep(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    loop = site.serve(
        "/loop.xml",
        f"<sitemapindex {NS}><sitemap><loc>{site.url}/loop.xml</loc>"
        "</sitemap></sitemapindex>".encode(),
    )
    result = await run_crawl(crawl_settings(str(tmp_path / "a.sqlite"), clock), sitemap_url=loop)
    assert result.reason == "finished" and result.stats["increcrawl/sitemap/repeated"] == 1
    for depth in range(4):
        site.serve(
            f"/nest{depth}.xml",
            f"<sitemapindex {NS}><sitemap><loc>{site.url}/nest{depth + 1}.xml"
            "</loc></sitemap></sitemapindex>".encode(),
        )
    result = await run_crawl(
        crawl_settings(str(tmp_path / "b.sqlite"), clock, INCRECRAWL_SITEMAP_MAX_DEPTH=2),
        sitemap_url=f"{site.url}/nest0.xml",
    )
    assert result.reason == "finished" and result.stats["increcrawl/sitemap/too_deep"] == 1
    assert result.stats["increcrawl/discovery_incomplete"] == 1
