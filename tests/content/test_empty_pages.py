"""A direct fetch answered 200 with an empty body, for a page that had content, keeps
the page's text: a site failure that backs off, never the fingerprint of the empty
string (which would take the next edit for a baseline). A page really empty (a
document with no text) is recorded, and the run says so. Served by nginx."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary, write_served

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

DAY = 86400.0
PAGES = {
    "p.html": "<html><body><main><h1>Prices</h1><p>Tea: 3 euros.</p></main></body></html>",
    "notes.txt": "Opening hours: 9 to 5.\n",
    "blank.html": "<html><head><title>Soon</title></head><body><div></div></body></html>",
}


def _write(root: Path, base: str, pages: dict[str, str]) -> None:
    for name, text in pages.items():
        write_served(root / name, text)
    urls = "".join(f"<url><loc>{base}/{name}</loc></url>" for name in pages)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


@pytest_twisted.ensureDeferred
async def test_an_empty_answer_keeps_the_page_and_a_blank_page_is_said(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, LOG_LEVEL="INFO")
        _write(root, url, PAGES)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        # The blank page is recorded as it is, and said.
        assert first.stats["increcrawl/pages/no_text"] == 1
        said = [line for line in first.log if line.startswith("WARNING increcrawl_scrapy.spiders")]
        assert said == [
            f"WARNING increcrawl_scrapy.spiders.page_content {url}/blank.html "
            "has no text at all: recorded as an empty page"
        ]

        _write(root, url, {**PAGES, "p.html": "", "notes.txt": ""})  # 200, empty bodies
        clock.advance(40 * DAY)
        empty = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert empty.changes("changed") == set()
        assert empty.stats["increcrawl/pages/empty"] == 2
        warned = [line for line in empty.log if line.startswith("WARNING")]
        assert sum("no document in its 0 bytes" in line for line in warned) == 2

        edited = {**PAGES, "p.html": PAGES["p.html"].replace("3 euros", "4 euros")}
        _write(root, url, edited)
        clock.advance(40 * DAY)
        after = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert after.changes("changed") == {f"{url}/p.html"}
