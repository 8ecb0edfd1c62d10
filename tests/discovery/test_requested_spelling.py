"""A sitemap's URLs that w3lib 2.6 spells otherwise than 2.5 when Scrapy requests
them (a bare host gets its "/", dot segments are resolved): crawled, and recorded
under the keys they had, whichever w3lib is installed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import pytest_twisted
from scrapy import Request

from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.discovery.loopback_names import loopback_names
from tests.discovery.test_www_seed import NS, write_site
from tests.servers import free_port, nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


@pytest_twisted.ensureDeferred
async def test_a_bare_host_and_dot_segments_are_crawled_under_their_keys(
    tmp_path: Path, clock: Clock
) -> None:
    port = free_port()
    site = tmp_path / "site"
    write_site(site, port, ["b"])
    (site / "index.html").write_text((site / "b.html").read_text().replace(">b<", ">home<"))
    origin = f"http://www.localhost:{port}"  # a name: the requested URL's fast path
    listed = (origin, f"{origin}/x/../b.html")
    entries = "".join(f"<url><loc>{url}</loc></url>" for url in listed)
    (site / "sitemap.xml").write_text(f"<urlset {NS}>{entries}</urlset>")
    db = str(tmp_path / "s.sqlite")
    with loopback_names(), nginx(site, tmp_path / "nginx", port=port):
        first = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{origin}/sitemap.xml")
        clock.advance(30 * 86_400)
        again = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{origin}/sitemap.xml")
    assert first.reason == "finished", first.log[-20:]
    # Pages are reported as Scrapy requested them (w3lib's spelling)...
    assert first.changes("new") == {Request(url).url for url in listed}
    assert not [k for k in first.stats if k.startswith("increcrawl/sitemap/skipped")]
    # ...and kept under keys no w3lib moves: the next run finds them.
    rows = {row[0] for row in sqlite3.connect(db).execute("SELECT normalized_url FROM pages")}
    assert rows == {f"{origin}/", f"{origin}/b.html"}
    assert again.changes("new") == set()
    assert again.changes("gone") == set()
