"""A change of how pages' text is taken (a minor upgrade of the converters, a changed
``INCRECRAWL_CONTENT_SELECTOR``) marks every page's fingerprint old. nginx answers a
conditional request with 304 and the mark stayed: the page's first real edit, a year
later, became its new baseline silently. A page marked old is re-read whole (no
validators sent) in the run after the change and its new fingerprint taken then, so
every edit made after it is reported; that run says what it costs.

Through Scrapy against nginx (real ETag and Last-Modified), with a moved clock: the
incremental spider over a sitemap, and the add-on in a project's own spider."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy

from increcrawl_scrapy.content import page_text
from tests.conftest import Clock
from tests.crawling import add_on, crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

DAY = 86_400.0
PAGES = 3


def _write(root: Path, i: int, price: str = "10") -> None:
    """Page *i* with *price*; an edit's file time moves on (nginx's validators are of
    whole seconds: an edit within the second of the write before would be a 304)."""
    page = root / f"p{i}.html"
    before = page.stat().st_mtime if page.exists() else 0.0
    page.write_text(
        f"<html><head><title>P{i}</title></head><body><nav><a href='/'>Home</a></nav>"
        f"<main><h1>Product {i}</h1><p class='price'>{price} EUR</p>"
        f"<p>Product {i} is a thing people buy, described in a sentence or two.</p>"
        "</main></body></html>"
    )
    if before:
        os.utime(page, (before + 10, before + 10))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, Path]]:
    """nginx serving *PAGES* product pages and their sitemap: (root, URL, access log)."""
    root = tmp_path / "www"
    root.mkdir()
    for i in range(PAGES):
        _write(root, i)
    with nginx(root, tmp_path / "nginx") as (url, access):
        urls = "".join(f"<url><loc>{url}/p{i}.html</loc></url>" for i in range(PAGES))
        (root / "sitemap.xml").write_text(
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{urls}</urlset>"
        )
        yield root, url, access


def _bump(monkeypatch: pytest.MonkeyPatch, library: str) -> None:
    """A new version of *library* installed: its version moves (its text not)."""
    real = page_text._version
    monkeypatch.setattr(
        page_text,
        "_version",
        lambda name, **kwargs: real(name, **kwargs) + (".1" if name == library else ""),
    )


def _converter_writes_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    """An upgrade of the markdown converter that writes text otherwise (emphasis)."""
    real = page_text.html_to_markdown
    monkeypatch.setattr(page_text, "html_to_markdown", lambda html: real(html).replace("**", "__"))


#: The ways the scheme moves: an upgrade of the converter that changes its text, a new
#: trafilatura, a setting (the same text here: each page's <main> is what it names).
CHANGES: dict[str, Callable[[pytest.MonkeyPatch, dict[str, Any]], None]] = {
    "converter": lambda monkeypatch, settings: _converter_writes_otherwise(monkeypatch),
    "trafilatura": lambda monkeypatch, settings: _bump(monkeypatch, "trafilatura"),
    "selector": lambda monkeypatch, settings: settings.update(INCRECRAWL_CONTENT_SELECTOR="main"),
}


def _page_lines(access: Path, since: int) -> list[str]:
    """The access log's lines for the product pages after line *since*."""
    lines = access.read_text().splitlines()[since:]
    return [line for line in lines if "/p" in line and ".html" in line]


def _said(log: list[str]) -> list[str]:
    return [line for line in log if "re-read whole" in line]


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest_twisted.ensureDeferred
async def test_an_edit_after_a_scheme_change_is_reported_a_year_later(
    served: tuple[Path, str, Path],
    tmp_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    root, url, access = served
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
    first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert len(first.changes("new")) == PAGES
    assert not _said(first.log)

    CHANGES[change](monkeypatch, settings)
    clock.advance(DAY)  # the next day's run: no page is due by its schedule
    seen = len(access.read_text().splitlines())
    second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert second.items == []  # nothing changed: the new baselines are not reported
    assert second.stats["increcrawl/pages/rebaselined"] == PAGES
    assert second.stats["increcrawl/pages/old_fingerprints"] == PAGES
    # Re-read whole, in this run: no If-None-Match, no If-Modified-Since; 200s.
    lines = _page_lines(access, seen)
    assert len(lines) == PAGES and all(
        line.startswith("200 ") and "inm=[]" in line and "ims=[]" in line for line in lines
    ), lines
    # What it costs and when, in one line.
    [line] = _said(second.log)
    assert f"{PAGES} pages" in line and "increcrawl/pages/rebaselined" in line

    # A year later the page is edited (nginx answers 304 to the others).
    clock.advance(365 * DAY)
    _write(root, 1, price="12")
    third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert third.changes("changed") == {f"{url}/p1.html"}
    assert "increcrawl/pages/rebaselined" not in third.stats
    assert not _said(third.log)


@pytest_twisted.ensureDeferred
async def test_an_edit_made_the_day_after_the_change_is_reported(
    served: tuple[Path, str, Path], tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page is not due by its schedule in the run after the change: it is re-read
    then all the same, so that an edit made after that run is compared, not taken."""
    root, url, _access = served
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
    await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    _bump(monkeypatch, "trafilatura")
    clock.advance(3600.0)
    second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert second.stats["increcrawl/pages/rebaselined"] == PAGES
    _write(root, 2, price="9")
    clock.advance(200 * DAY)  # every page due again
    third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert third.changes("changed") == {f"{url}/p2.html"}


@pytest_twisted.ensureDeferred
async def test_a_converter_upgrade_that_changes_no_text_re_reads_nothing(
    served: tuple[Path, str, Path], tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """html-to-markdown's minor versions changed the text of none of 409 real pages
    (benchmarks/RESULTS.md): its upgrade is no scheme change unless its samples'
    text moves, and the pages are asked conditionally as ever."""
    root, url, access = served
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
    await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    _bump(monkeypatch, "html-to-markdown")
    clock.advance(200 * DAY)
    seen = len(access.read_text().splitlines())
    second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert second.items == [] and not _said(second.log)
    assert "increcrawl/pages/old_fingerprints" not in second.stats
    lines = _page_lines(access, seen)
    assert len(lines) == PAGES and all(line.startswith("304 ") for line in lines), lines
    _write(root, 0, price="11")
    clock.advance(200 * DAY)
    third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert third.changes("changed") == {f"{url}/p0.html"}


class ProductsSpider(scrapy.Spider):
    """A project's spider: an item of each product page, its name and price."""

    name = "products"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        yield {
            "url": response.url,
            "name": response.css("h1::text").get(),
            "price": response.css("p.price::text").get(),
        }


@pytest.mark.parametrize("change", sorted(CHANGES))
@pytest_twisted.ensureDeferred
async def test_the_add_on_delivers_an_item_edited_after_a_scheme_change(
    served: tuple[Path, str, Path],
    tmp_path: Path,
    clock: Clock,
    monkeypatch: pytest.MonkeyPatch,
    change: str,
) -> None:
    """#50 item 10: an item's own fields pass through no converter; its edit after a
    scheme change is delivered `changed`, whatever the page's rebaseline."""
    root, url, access = served
    urls = [f"{url}/p{i}.html" for i in range(PAGES)]
    settings = add_on(str(tmp_path / "s.sqlite"), clock, LOG_LEVEL="INFO")
    first = await run_crawl(settings, spider_class=ProductsSpider, urls=urls)
    assert first.changes("new") == set(urls)

    CHANGES[change](monkeypatch, settings)
    clock.advance(40 * DAY)
    seen = len(access.read_text().splitlines())
    second = await run_crawl(settings, spider_class=ProductsSpider, urls=urls)
    assert second.items == []
    lines = _page_lines(access, seen)
    assert len(lines) == PAGES and all("inm=[]" in line for line in lines), lines
    assert len(_said(second.log)) == 1

    clock.advance(365 * DAY)
    _write(root, 0, price="15")
    third = await run_crawl(settings, spider_class=ProductsSpider, urls=urls)
    assert third.changes("changed") == {urls[0]}
    [item] = third.items
    assert item["price"] == "15 EUR"
