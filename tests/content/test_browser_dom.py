"""A page is read as browsers build its DOM (#51, 1-2), through Scrapy, served by nginx.

Real markup: Starlette's documentation built by MkDocs Material with Starlette's own
template overrides, one of which writes a stray ``</li>`` per table-of-contents entry
(browsers ignore it; libxml2 closed the sidebar early and the navigation landed in
``<main>``). A NUL byte in a page's text (Docusaurus wrote one on a rebuild): browsers
drop it. Content nested hundreds of elements deep: its text is all kept.
"""

from __future__ import annotations

import gc
import os
import sqlite3
import sys
import threading
from pathlib import Path

import lxml.etree
import pytest
import pytest_twisted

from increcrawl_scrapy.content.page_text import ContentOptions, page_text
from increcrawl_scrapy.content.parse import FLATTEN_DEPTH, parse_html
from tests.conftest import Clock
from tests.content.material_site import StarletteDocs, material_available
from tests.crawling import crawl_settings, run_crawl
from tests.servers import free_port, nginx, nginx_binary
from tests.support.failing import converter_failing_on

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed (.ci/run does)"),
]

LATER = 200 * 86400.0  # every page due again
UNTRUSTED = {"INCRECRAWL_LASTMOD_MIN_EVIDENCE": 100_000}  # every page fetched each run


@pytest.fixture
def starlette(tmp_path: Path):
    if not material_available():
        if os.environ.get("CI") == "true":
            pytest.fail("mkdocs-material is not installed")
        pytest.skip("mkdocs-material is not installed (pip install -e .[test])")
    port = free_port()
    site = StarletteDocs(tmp_path / "site", f"http://127.0.0.1:{port}")
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port) as (url, _access):
        assert url == site.base_url
        yield site


def _sitemap(root: Path, url: str, names: list[str]) -> None:
    """A sitemap at *root* listing the pages ``NAME.html`` served at *url*."""
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        + "".join(f"<url><loc>{url}/{name}.html</loc></url>" for name in names)
        + "</urlset>"
    )


async def _crawl(site: StarletteDocs, settings: dict) -> object:
    return await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")


@pytest_twisted.ensureDeferred
async def test_a_stray_end_tag_in_the_template_leaves_the_navigation_out(
    starlette: StarletteDocs, tmp_path: Path, clock: Clock
) -> None:
    site = starlette
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _crawl(site, settings)
    assert first.changes("new") == site.urls()
    routing = next(i for i in first.items if i["url"] == site.url_of("routing"))
    assert "HTTP Routing" in routing["markdown"]
    # No other page's navigation label in this page's own text.
    assert "Third Party Packages" not in routing["markdown"]
    assert "Static Files" not in routing["markdown"]

    # A navigation-only rebuild: a section and a page renamed in the navigation.
    site.rename_nav_label("Features", "The guide")
    site.rename_nav_label("Contributing", "How to contribute")  # its page has its own h1
    site.build()
    clock.advance(LATER)
    second = await _crawl(site, settings)
    assert second.changes("changed") == set()
    assert second.stats["increcrawl/unchanged"] == len(site.urls())

    # A real edit is still seen.
    site.edit_page("lifespan", "A line the lifespan page did not have.")
    site.build()
    clock.advance(LATER)
    third = await _crawl(site, settings)
    assert third.changes("changed") == {site.url_of("lifespan")}


@pytest_twisted.ensureDeferred
async def test_a_nul_byte_in_the_text_is_dropped_as_browsers_drop_it(
    starlette: StarletteDocs, tmp_path: Path, clock: Clock
) -> None:
    site = starlette
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _crawl(site, settings)
    assert first.changes("new") == site.urls()

    # A rebuild of the same sources that writes a NUL byte into a page's text.
    site.build()
    page = site.out / "routing" / "index.html"
    html = page.read_text()
    assert "capable request routing system" in html
    page.write_text(html.replace("capable request", "capable\x00 request", 1))
    clock.advance(LATER)
    second = await _crawl(site, settings)
    assert second.changes("changed") == set()
    assert second.stats["increcrawl/unchanged"] == len(site.urls())


@pytest_twisted.ensureDeferred
async def test_deep_nesting_keeps_every_text_and_says_when_it_flattens(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    pages = {"deep": 400, "deeper": 3000}
    for name, depth in pages.items():
        (root / f"{name}.html").write_text(
            f"<!doctype html><html><head><title>{name}</title></head><body>"
            "<nav><a href='/'>Home</a></nav><main><h1>Nested</h1>"
            + "<div>" * depth
            + f"<p>The text at depth {depth}.</p>"
            + "</div>" * depth
            + "<p>The text after it.</p></main><footer>(c) 2026</footer></body></html>"
        )
    with nginx(root, tmp_path / "nginx") as (url, _access):
        _sitemap(root, url, list(pages))
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        done = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    by_name = {i["url"].rsplit("/", 1)[1]: i["markdown"] for i in done.items}
    for name, depth in pages.items():
        assert f"The text at depth {depth}." in by_name[f"{name}.html"]
        assert "The text after it." in by_name[f"{name}.html"]
        assert "Home" not in by_name[f"{name}.html"]
    # 3000 levels are more than a browser nests (512): flattened as it does, and said.
    assert done.stats["increcrawl/content/flattened"] == 1
    warnings = [line for line in done.log if line.startswith("WARNING") and "flattened" in line]
    assert len(warnings) == 1 and "deeper.html" in warnings[0]


@pytest_twisted.ensureDeferred
async def test_control_bytes_in_the_text_are_read_as_browsers_show_them(
    tmp_path: Path, clock: Clock
) -> None:
    """Browsers show a page whose text holds runs of control bytes (a paste from a
    terminal, a broken export) with the bytes as nothing. The markdown converter
    refused it ("binary data detected"): a spider error on every run, the page in
    none of the summary's counts and never recorded."""
    root = tmp_path / "www"
    root.mkdir()
    noise = "".join(map(chr, [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15])) * 400
    (root / "noisy.html").write_text(
        "<!doctype html><html><head><title>Noisy</title></head><body><main><h1>Noisy</h1>"
        f"<p>The words before{noise} and after the bytes.</p></main></body></html>"
    )
    (root / "plain.html").write_text(
        "<!doctype html><html><body><main><h1>Plain</h1><p>A page.</p></main></body></html>"
    )
    with nginx(root, tmp_path / "nginx") as (url, _access):
        _sitemap(root, url, ["noisy", "plain"])
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/noisy.html", f"{url}/plain.html"}
        assert not [k for k in first.stats if k.startswith("spider_exceptions")]
        noisy = next(i for i in first.items if i["url"].endswith("/noisy.html"))
        assert "The words before and after the bytes." in noisy["markdown"]
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert second.stats["increcrawl/unchanged"] == 2


@pytest_twisted.ensureDeferred
async def test_a_page_whose_text_a_library_fails_on_is_an_error_counted(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library failing on one page's markup (the converter's next refusal, a
    parser's bug) was a spider error: the page in none of the run summary's counts.
    It is a site failure that backs off, counted and said, the page kept due; the
    run's other pages are recorded."""
    from increcrawl_scrapy.content import page_text as module

    convert = converter_failing_on("Unconvertible", monkeypatch)
    root = tmp_path / "www"
    root.mkdir()
    for name in ("fails", "fails-too", "plain"):
        title = "Unconvertible" if name.startswith("fails") else "Plain"
        (root / f"{name}.html").write_text(
            f"<!doctype html><html><body><main><h1>{title}</h1><p>A page.</p></main></body></html>"
        )
    with nginx(root, tmp_path / "nginx") as (url, _access):
        _sitemap(root, url, ["fails", "fails-too", "plain"])
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/plain.html"}
        assert not [k for k in first.stats if k.startswith("spider_exceptions")]
        assert first.stats["increcrawl/pages/content_failed"] == 2
        assert first.stats["increcrawl/errors"] == 2
        said = [
            line
            for line in first.log
            if line.startswith("WARNING") and "/fails" in line and "converter's fault" in line
        ]
        # Said with where it failed (a bug of ours looks the same as a library's), the
        # traceback once a run for each library's exception.
        assert len(said) == 2
        traced = [line for line in said if "Traceback" in line]
        assert len(traced) == 1 and "in failing" in traced[0]
        with sqlite3.connect(tmp_path / "s.sqlite") as db:  # under its own kind, not "too large"
            assert db.execute(
                "SELECT DISTINCT kind FROM checks WHERE kind IS NOT NULL"
            ).fetchall() == [("content failed",)]
        monkeypatch.setattr(module, "html_to_markdown", convert)
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert f"{url}/fails.html" in second.changes("new")


def test_the_parse_is_a_browsers_on_what_libxml2_read_otherwise() -> None:
    # A stray </li> in a nested list leaves the outer item open (libxml2 closed it).
    root = parse_html("<nav><ul><li>a<ul><li></li>b</li></ul>c</li></ul></nav><main>m</main>").root
    assert root.xpath("string(//nav)") == "abc" and root.xpath("string(//main)") == "m"
    assert parse_html("<p>Star\x00lette</p>").root.text_content() == "Starlette"
    # 600 levels: flattened past 512 as Chromium does, every text kept.
    deep = parse_html("<main>" + "<div>" * 600 + "deep" + "</div>" * 600 + "<p>after</p></main>")
    assert deep.flattened and "deep" in deep.root.text_content()
    assert "after" in deep.root.text_content()
    assert max(len(list(e.iterancestors())) for e in deep.root.iter()) == FLATTEN_DEPTH
    shallow = parse_html("<main>" + "<div>" * 400 + "deep" + "</div>" * 400 + "</main>")
    assert not shallow.flattened and "deep" in shallow.root.text_content()
    # No document: an empty or comment-only body (page_text's EmptyDocument).
    for empty in (b"", b" \n", b"<!-- nothing -->"):
        with pytest.raises(lxml.etree.ParserError):
            parse_html(empty)
    assert parse_html(b"<html></html>").root.tag == "html"


def test_an_empty_page_parsed_on_one_thread_is_let_go_on_another() -> None:
    # The content thread parses; the reactor's thread handles its EmptyDocument. The
    # parser's tree must not travel with the exception (it may only die where made).
    unraisable: list[BaseException | None] = []
    caught: list[BaseException] = []

    def parse() -> None:
        try:
            parse_html(b"<!-- nothing -->")
        except lxml.etree.ParserError as exc:
            caught.append(exc)

    hook, sys.unraisablehook = sys.unraisablehook, lambda u: unraisable.append(u.exc_value)
    try:
        worker = threading.Thread(target=parse)
        worker.start()
        worker.join()
        caught.clear()  # the exception, its traceback, let go on this thread
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert unraisable == []


def test_the_whole_page_keeps_its_deep_text_too() -> None:
    # INCRECRAWL_MAIN_CONTENT = False: the converter alone cut text past ~1,000 levels.
    page = "<body>" + "<div>" * 3000 + "<p>At the bottom.</p>" + "</div>" * 3000 + "<p>After.</p>"
    found = page_text(page.encode(), "text/html", page, ContentOptions(main_only=False))
    assert found.flattened and found.how == "page"
    assert "At the bottom." in found.text and "After." in found.text


def test_a_content_failure_crosses_from_a_worker_whole() -> None:
    # A worker's failure comes back pickled: its traceback and its cause with it.
    import pickle

    from increcrawl_scrapy.content.page_text import ContentFailed

    back = pickle.loads(pickle.dumps(ContentFailed("its text", "Traceback ...", "TypeError")))
    assert (str(back), back.trace, back.cause, back.kind) == (
        "its text",
        "Traceback ...",
        "TypeError",
        "content failed",
    )
