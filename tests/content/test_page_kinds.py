"""Pages that are not ordinary HTML, served by nginx: soft 404s, PDFs and other bytes,
pages over the size limit. Through Scrapy, over runs with a moved clock."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import free_port, nginx, nginx_binary
from tests.support.failing import converter_failing_on
from tests.support.generators import DocSite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

LATER = 200 * 86400.0
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"


@pytest_twisted.ensureDeferred
async def test_a_site_answering_200_with_its_not_found_page_has_those_pages_gone(
    tmp_path: Path, clock: Clock
) -> None:
    pytest.importorskip("mkdocs")
    port = free_port()
    site = DocSite("mkdocs", tmp_path / "site", f"http://127.0.0.1:{port}", pages=8)
    site.build()
    # A stale sitemap: topic-008 is listed, but the site no longer has it.
    shutil.rmtree(site.out / "topic-008")
    soft = "error_page 404 =200 /404.html;"  # MkDocs's own 404 page, with a 200
    with nginx(site.out, tmp_path / "nginx", port=port, extra=soft):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert first.stats["increcrawl/soft_404/probes"] == 1
        assert site.url_of("topic-008") not in first.changes("new")
        assert first.changes("new") == {site.url_of(f"topic-00{i}") for i in range(1, 8)}
        assert first.stats["increcrawl/pages/soft_404"] == 1

        # A page removed from the site while its sitemap still lists it: gone, not changed.
        shutil.rmtree(site.out / "topic-003")
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert second.changes("gone") == {site.url_of("topic-003")}
        assert second.changes("changed") == set()

        # A run whose probe gets no answer (robots.txt forbids it) goes by the last
        # run's verdict: the soft 404s stay gone, a page removed since is gone too.
        (site.out / "robots.txt").write_text("User-agent: *\nDisallow: /increcrawl-\n")
        shutil.rmtree(site.out / "topic-005")
        clock.advance(LATER)
        third = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert "increcrawl/soft_404/probes" not in third.stats
        assert third.changes("gone") == {site.url_of("topic-005")}
        assert third.changes("new") == set() and third.changes("changed") == set()


@pytest_twisted.ensureDeferred
async def test_a_site_whose_404s_are_404s_learns_nothing(tmp_path: Path, clock: Clock) -> None:
    pytest.importorskip("mkdocs")
    port = free_port()
    site = DocSite("mkdocs", tmp_path / "site", f"http://127.0.0.1:{port}", pages=4)
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert len(first.changes("new")) == 4
        assert "increcrawl/pages/soft_404" not in first.stats


@pytest_twisted.ensureDeferred
async def test_a_catch_all_site_answering_its_home_page_keeps_its_home_page_live(
    tmp_path: Path, clock: Clock
) -> None:
    # A real Hugo blog behind a catch-all server (an SPA's fallback, a theme's
    # "route everything to /"): an unknown path answers the home page with 200. That
    # answer is a live listed page, never the site's "not found" page.
    if shutil.which("hugo") is None:
        pytest.skip("hugo is not installed (.ci/run installs it)")
    port = free_port()
    site = DocSite("hugo", tmp_path / "site", f"http://127.0.0.1:{port}", pages=5)
    site.build()
    home = f"{site.base_url}/"
    catch_all = "location / { try_files $uri $uri/ /index.html; }"
    with nginx(site.out, tmp_path / "nginx", port=port, extra=catch_all):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert first.stats["increcrawl/soft_404/probes"] == 1
        assert "increcrawl/pages/soft_404" not in first.stats
        assert home in first.changes("new")
        assert set(site.urls()) <= first.changes("new")
        assert any("answers every path" in line for line in first.log)

        # The home page's own text edited: a change of a live page, not a gone one.
        index = site.out / "index.html"
        index.write_text(index.read_text().replace("<main>", "<main><p>Welcome back.</p>"))
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert home in second.changes("changed")
        assert second.changes("gone") == set()


@pytest_twisted.ensureDeferred
async def test_a_catch_all_site_whose_root_redirects_keeps_its_home_page(
    tmp_path: Path, clock: Clock
) -> None:
    # "/" redirects to the language's home (Hugo's multilingual default), every
    # unknown path answers that home (from a review: the redirect hid the home page's
    # text, the catch-all answer was learned, and the live /en/ was gone).
    root = tmp_path / "www"
    (root / "en").mkdir(parents=True)
    page = "<html><body><main><h1>{0}</h1><p>{0}, its own text.</p></main></body></html>"
    (root / "en" / "index.html").write_text(page.format("Home: the latest posts"))
    (root / "en" / "a.html").write_text(page.format("Post A"))
    extra = "location = / { return 302 /en/; } location / { try_files $uri $uri/ /en/index.html; }"
    with nginx(root, tmp_path / "nginx", extra=extra) as (url, _access):
        _sitemap(root, url, ["en/", "en/a.html"])
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert first.changes("new") == {f"{url}/en/", f"{url}/en/a.html"}
    assert "increcrawl/pages/soft_404" not in first.stats
    assert first.stats["increcrawl/soft_404/catch_all"] == 1


def _write_files(root: Path, base: str, files: dict[str, bytes]) -> None:
    for name, body in files.items():
        (root / name).write_bytes(body)
    _sitemap(root, base, list(files))


def _sitemap(root: Path, base: str, paths: list[str]) -> None:
    urls = "".join(f"<url><loc>{base}/{path}</loc></url>" for path in paths)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


@pytest_twisted.ensureDeferred
async def test_pdfs_and_other_bytes_are_fingerprinted_as_bytes(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        files = {
            "report.pdf": PDF,
            "disguised.html": PDF,  # served as text/html: its signature says PDF
            "data.json": b'{"price": 10}',
            "page.html": b"<html><body><main><p>Text</p></main></body></html>",
        }
        _write_files(root, url, files)
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        texts = {item["url"].rsplit("/", 1)[1]: item["markdown"] for item in first.items}
        assert texts["report.pdf"].startswith("binary sha256:")
        assert texts["disguised.html"].startswith("binary sha256:")
        assert texts["data.json"] == '{"price": 10}'
        assert texts["page.html"].strip() == "Text"
        assert first.stats["increcrawl/content/bytes"] == 2

        _write_files(root, url, {**files, "report.pdf": PDF + b"% edited\n"})
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert second.changes("changed") == {f"{url}/report.pdf"}


@pytest_twisted.ensureDeferred
async def test_a_50_mb_page_is_a_site_failure_not_a_crash(tmp_path: Path, clock: Clock) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        paragraph = b"<p>" + b"word " * 200 + b"</p>\n"
        big = b"<html><body><main>" + paragraph * (50 * 1024 * 1024 // len(paragraph))
        _write_files(
            root,
            url,
            {"big.html": big + b"</main></body></html>", "small.html": b"<main>small</main>"},
        )
        db = str(tmp_path / "s.sqlite")
        first = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{url}/sitemap.xml")
        assert first.reason == "finished"
        assert first.changes("new") == {f"{url}/small.html"}
        assert first.stats["increcrawl/pages/too_large"] == 1
        assert first.stats["increcrawl/errors/backed_off"] == 1
        with StateStore(db) as store:
            page = store.get(f"{url}/big.html")
            assert page is not None and page.error_streak == 1 and page.content_hash is None


@pytest_twisted.ensureDeferred
async def test_a_page_naming_another_as_canonical_is_an_alias_not_a_second_change(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):

        def pages(text: str) -> dict[str, bytes]:
            body = f"<main><h1>Shoes</h1><p>{text}</p></main></body></html>"
            return {
                "shoes.html": f"<html><head></head><body>{body}".encode(),
                # The same page under a tracking spelling the sitemap lists too.
                "shoes-promo.html": (
                    f'<html><head><link rel="canonical" href="{url}/shoes.html"></head><body>{body}'
                ).encode(),
                # Canonical to another site: still a page of its own.
                "syndicated.html": (
                    b'<html><head><link rel="canonical" href="http://elsewhere.invalid/x">'
                    b"</head><body><main><p>Syndicated</p></main></body></html>"
                ),
            }

        _write_files(root, url, pages("Red"))
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/shoes.html", f"{url}/syndicated.html"}
        assert first.stats["increcrawl/pages/aliases"] == 1

        _write_files(root, url, pages("Blue"))
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert {(i["url"], i["change"]) for i in second.items} == {(f"{url}/shoes.html", "changed")}
        with StateStore(db) as store:
            alias = store.get(f"{url}/shoes-promo.html")
            assert alias is not None and alias.content_hash == f"alias:{url}/shoes.html"
            assert alias.change_count == 0

        # The promotion page becomes a page of its own: new, never reported before.
        own = pages("Blue")
        own["shoes-promo.html"] = b"<html><body><main><p>Promo: Blue</p></main></body></html>"
        _write_files(root, url, own)
        clock.advance(LATER)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert {(i["url"], i["change"]) for i in third.items} == {
            (f"{url}/shoes-promo.html", "new")
        }


@pytest_twisted.ensureDeferred
async def test_a_200_with_an_empty_body_is_a_site_failure_that_keeps_the_page(
    tmp_path: Path, clock: Clock
) -> None:
    # An empty answer (a truncated response, a server mid-deploy) is no document:
    # not a crash of the callback, not a page changed to nothing and back.
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        pages = {
            "a.html": b"<main>first words</main>",
            "b.html": b"<main>other</main>",
            "c.html": b"<main>a page that stays</main>",  # not every fetch fails
        }
        _write_files(root, url, pages)
        db = str(tmp_path / "s.sqlite")
        first = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in pages}
        (root / "a.html").write_bytes(b"")
        (root / "b.html").write_bytes(b"<!-- nothing but a comment -->")
        clock.advance(LATER)
        second = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{url}/sitemap.xml")
        assert second.reason == "finished"
        assert "spider_exceptions/ParserError" not in second.stats
        assert second.stats["increcrawl/pages/empty"] == 2
        assert second.changes("changed") == set() and second.changes("gone") == set()
        with StateStore(db) as store:
            page = store.get(f"{url}/a.html")
            assert page is not None and page.error_streak == 1
        (root / "a.html").write_bytes(b"<main>first words</main>")
        (root / "b.html").write_bytes(b"<main>other</main>")
        clock.advance(LATER)
        third = await run_crawl(crawl_settings(db, clock), sitemap_url=f"{url}/sitemap.xml")
        assert third.changes("changed") == set()  # back as it was: nothing to report


@pytest_twisted.ensureDeferred
async def test_a_library_failing_on_the_sites_not_found_page_keeps_the_last_verdict(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The soft-404 probe took the site's "not found" page's text without the
    guard every page has: a library failing on it raised out of the spider's start.
    It is said, and the last run's verdict holds, as when the probe gets no answer."""
    root = tmp_path / "www"
    root.mkdir()
    page = "<html><body><main><h1>{0}</h1><p>{0}, its own text.</p></main></body></html>"
    (root / "a.html").write_text(page.format("Post A"))
    (root / "404.html").write_text(page.format("Unconvertible: nothing here"))
    soft = "error_page 404 =200 /404.html;"
    with nginx(root, tmp_path / "nginx", extra=soft) as (url, _access):
        _sitemap(root, url, ["a.html", "b.html"])  # b.html: a page the site no longer has
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.stats["increcrawl/pages/soft_404"] == 1
        learned = StateStore(str(tmp_path / "s.sqlite")).remembered(f"not_found:{url}")
        assert learned

        converter_failing_on("Unconvertible", monkeypatch)
        (root / "a.html").write_text(page.format("Post A, edited"))
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert not [k for k in second.stats if k.startswith("spider_exceptions")]
    assert not [line for line in second.log if line.startswith(("ERROR", "CRITICAL"))]
    assert second.changes("changed") == {f"{url}/a.html"}
    said = [line for line in second.log if line.startswith("WARNING") and "not found" in line]
    assert len(said) == 1 and "converter's fault" in said[0]
    assert StateStore(str(tmp_path / "s.sqlite")).remembered(f"not_found:{url}") == learned
