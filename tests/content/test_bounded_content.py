"""A page's content work is bounded: a huge page without a main element (a plain
repetitive table) is read in linear time, its whole body less the template, not by
trafilatura's extraction (over four minutes and 1.9 GB for 10 MB, every other page's
content work waiting behind it on the one content thread). The page is still
fingerprinted, the same way on every run, and the run says it was cut. Served by
nginx."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.content.page_text import ContentOptions, PageText, page_text
from tests.conftest import Clock
from tests.content.growth import MOST, growth
from tests.crawling import crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

DAY = 86400.0
TEMPLATE = '<nav><a href="/">Home</a> <a href="/big.html">Data</a></nav>'
FOOTER = "<footer>(c) 2026 Data Inc.</footer>"
#: A 1.1 MB inline script: a page's template grown past the limit, its text not.
GROWN = "<script>var data = [" + ",".join(["1234567890"] * 100_000) + "];</script>"


def _page(body: str, head: str = "") -> str:
    return f"<html><head><title>t</title>{head}</head><body>{TEMPLATE}{body}{FOOTER}</body></html>"


def _table(rows: int, edited: int | None = None) -> str:
    """About 57 bytes a row: 70,000 rows are 4 MB."""
    cells = "".join(
        f"<tr><td>row {i}</td><td>{'EDITED' if i == edited else f'value {i % 97}'}</td>"
        "<td>item</td></tr>"
        for i in range(rows)
    )
    return f"<h1>All the data</h1><table>{cells}</table>"


def _post(i: int, text: str = "") -> str:
    words = " ".join(f"word{j}" for j in range(60))
    return f'<div class="post"><h1>Post {i}</h1><p>{text or f"Note {i}."} {words}</p></div>'


def _write(root: Path, base: str, pages: dict[str, str]) -> None:
    for name, html in pages.items():
        (root / name).write_text(html)
    urls = "".join(f"<url><loc>{base}/{name}</loc></url>" for name in pages)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


@pytest_twisted.ensureDeferred
async def test_a_huge_table_is_fingerprinted_cheaply_and_said(tmp_path: Path, clock: Clock) -> None:
    root = tmp_path / "www"
    root.mkdir()
    pages = {f"p{i}.html": _page(_post(i)) for i in range(6)}
    pages["m.html"] = _page("<main><h1>Main</h1><p>A page that marks its main part.</p></main>")
    pages["big.html"] = _page(_table(70_000))
    assert len(pages["big.html"]) > 3_900_000
    with nginx(root, tmp_path / "nginx") as (url, _access):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, LOG_LEVEL="INFO")
        _write(root, url, pages)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in pages}
        big = next(item for item in first.items if item["url"] == f"{url}/big.html")
        assert "row 69999" in big["markdown"] and "Home" not in big["markdown"]
        assert first.stats["increcrawl/content/cut"] == 1
        assert first.stats["increcrawl/content/named"] == 6
        cut = [line for line in first.log if "INCRECRAWL_CONTENT_MAX_BYTES" in line]
        assert len(cut) == 1 and f"{url}/big.html" in cut[0] and cut[0].startswith("INFO")

        clock.advance(40 * DAY)  # every page due again, nothing edited
        again = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert again.changes("changed") == set()
        assert again.stats["increcrawl/unchanged"] == len(pages)

        pages["big.html"] = _page(_table(70_000, edited=41_234))
        _write(root, url, pages)
        clock.advance(40 * DAY)
        edited = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert edited.changes("changed") == {f"{url}/big.html"}


#: A page that names nothing: trafilatura's extraction leaves its share box out.
EXTRACTED = (
    "<div><h1>Post 2</h1><p>Note 2. " + " ".join(f"word{j}" for j in range(60)) + "</p></div>"
    '<div class="share-links">Share this on Twitter</div>'
)


@pytest_twisted.ensureDeferred
async def test_a_page_grown_past_the_limit(tmp_path: Path, clock: Clock) -> None:
    """Its template grown past the limit, its text not: a page that marks its main
    part, or names its content's container alone in its body, reads the same; one read
    by extraction is read whole from then on: reported changed once (the way its text
    is taken changed, as after a change of scheme), then stable."""
    root = tmp_path / "www"
    root.mkdir()
    bodies = {
        "main.html": "<main><h1>Main</h1><p>A page that marks its main part.</p></main>",
        "named.html": _post(1),
        "extracted.html": EXTRACTED,
    }
    with nginx(root, tmp_path / "nginx") as (url, _access):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, LOG_LEVEL="INFO")
        _write(root, url, {name: _page(body) for name, body in bodies.items()})
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.stats["increcrawl/content/extracted"] == 1
        _write(root, url, {name: _page(body, GROWN) for name, body in bodies.items()})
        clock.advance(40 * DAY)
        grown = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert grown.changes("changed") == {f"{url}/extracted.html"}
        assert grown.stats["increcrawl/content/cut"] == 2
        said = [line for line in grown.log if "INCRECRAWL_CONTENT_MAX_BYTES" in line]
        assert {line.split()[2] for line in said} == {
            f"{url}/named.html:",
            f"{url}/extracted.html:",
        }
        clock.advance(40 * DAY)
        again = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert again.changes("changed") == set()
        assert again.stats["increcrawl/unchanged"] == 3


def test_a_page_past_the_limit_is_read_in_linear_time() -> None:
    # Read by trafilatura's extraction, 4 MB of table took 12.5 s of CPU (minutes for
    # 10 MB); cut, the whole body is read, the work growing as the page does.
    options = ContentOptions(extract_max_bytes=50_000)

    def text_of(html: str) -> PageText:
        return page_text(html.encode(), "text/html", html, options)

    assert text_of(_page(_table(2_000))).how == "cut"
    assert growth(text_of, lambda rows: _page(_table(rows)), 2_000) < MOST
