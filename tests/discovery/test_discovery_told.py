"""Discovery told straight, through ``scrapy crawl``: the same sitemap under two
names read and counted once, a sitemap at a well-known path read even when
robots.txt names another, a seed taking another's rows warned about, and the
summary's counts equal to the rows."""

from __future__ import annotations

import gzip
import re
import sqlite3
from pathlib import Path

from increcrawl_scrapy.testing import SampleSite
from tests.support.process import crawl_command, run_process


def urlset(urls: list[str]) -> bytes:
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in urls)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>\n'
    ).encode()


def crawl(db: Path, *args: str):
    command = crawl_command("", db, "INCRECRAWL_FETCHER=direct")
    at = command.index("sitemap_url=")
    command[at - 1 : at + 1] = []  # no -a sitemap_url
    for arg in args:
        command += ["-a", arg]
    return run_process(command, db.parent)


def discovered(log: str) -> int:
    return int(re.search(r"discovered ([\d,]+) URLs", log).group(1).replace(",", ""))


def rows(db: Path, seed: str | None = None) -> int:
    with sqlite3.connect(db) as connection:
        if seed is None:
            return connection.execute("SELECT count(*) FROM pages").fetchone()[0]
        return connection.execute("SELECT count(*) FROM pages WHERE seed = ?", (seed,)).fetchone()[
            0
        ]


def test_the_same_sitemap_under_two_names_is_read_and_counted_once(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=30) as site:
        body = urlset(site.page_urls())
        site.serve("/robots.txt", b"User-agent: *\nAllow: /\n", "text/plain")
        site.serve("/sitemap.xml", body)
        site.serve("/sitemap.xml.gz", gzip.compress(body), "application/gzip")
        done = crawl(db, f"site_url={site.url}/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert discovered(done.stderr) == 30 == rows(db)
    assert "'increcrawl/discovered': 30" in done.stderr
    assert "'increcrawl/sitemap/duplicate': 1" in done.stderr
    assert "is the same document as" in done.stderr
    assert "30 fetched: 30 new" in done.stderr


def test_two_sitemaps_sharing_urls_count_each_url_once(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=20) as site:
        urls = site.page_urls()
        first = site.serve("/a.xml", urlset(urls[:15]))
        second = site.serve("/b.xml", urlset(urls[5:]))
        done = crawl(db, f"sitemap_url={first},{second}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert discovered(done.stderr) == 20 == rows(db)


def test_an_unpublished_sitemap_at_a_well_known_path_is_read_too(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=20) as site:
        urls = site.page_urls()
        news = site.serve("/news-sitemap.xml", urlset(urls[:5]))
        site.serve("/robots.txt", f"User-agent: *\nSitemap: {news}\n".encode(), "text/plain")
        unpublished = site.serve("/sitemap.xml", urlset(urls))  # not declared
        done = crawl(db, f"site_url={site.url}/")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"at well-known paths: {unpublished}" in done.stderr
    assert discovered(done.stderr) == 20 == rows(db)


def test_a_seed_taking_over_another_seeds_rows_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=8) as site:
        body = urlset(site.page_urls())
        old = site.serve("/old-sitemap.xml", body)
        assert crawl(db, f"sitemap_url={old}").returncode == 0
        new = site.serve("/new-sitemap.xml", body)
        done = crawl(db, f"sitemap_url={new}")
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if "now belong to seed" in line]
    assert len(warned) == 2, warned  # logged, and repeated in the run summary
    assert (
        warned[0]
        .split(" WARNING: ")[1]
        .startswith(f"8 pages listed under seed {old} now belong to seed {new}")
    )
    assert rows(db, new) == 8 and rows(db, old) == 0
    assert discovered(done.stderr) == 8
