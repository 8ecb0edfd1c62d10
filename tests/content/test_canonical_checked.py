"""``rel=canonical`` checked against the page's content, through whole crawls on nginx:
a page is an alias (kept, never reported) only when its text is its canonical page's
and that page is crawled; a canonical that is the page itself up to scheme and
``www.`` is the page itself. Every case here hid real edits before."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import free_port, nginx, nginx_binary
from tests.support.generators import DocSite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

DAY = 86400.0
LATER = 200 * DAY  # every page due again


def _page(text: str, canonical: str | None = None) -> bytes:
    link = f'<link rel="canonical" href="{canonical}">' if canonical else ""
    return (
        f"<html><head><title>{text[:12]}</title>{link}</head><body>"
        f"<main><h1>{text[:12]}</h1><p>{text}</p></main></body></html>"
    ).encode()


def _site(root: Path, base: str, pages: dict[str, bytes], listed: list[str] | None = None) -> None:
    for name, body in pages.items():
        (root / name).write_bytes(body)
    urls = "".join(f"<url><loc>{base}/{name}</loc></url>" for name in listed or pages)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


def _reported(result) -> set[tuple[str, str]]:
    return {(item["url"].rsplit("/", 1)[1], item["change"]) for item in result.items}


@pytest_twisted.ensureDeferred
async def test_a_site_whose_pages_name_their_own_https_spelling_reports_its_edits(
    tmp_path: Path, clock: Clock
) -> None:
    # The commonest canonical there is: every page served over http names itself over
    # https. It is the page itself, not an alias of another page.
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        secure = url.replace("http://", "https://")
        names = [f"p{i}.html" for i in range(1, 5)]

        def pages(edited: str = "") -> dict[str, bytes]:
            return {
                n: _page(f"Page {n} {'edited ' if n == edited else ''}text", f"{secure}/{n}")
                for n in names
            }

        _site(root, url, pages())
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(first) == {(n, "new") for n in names}
        assert "increcrawl/pages/aliases" not in first.stats

        _site(root, url, pages(edited="p2.html"))
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(second) == {("p2.html", "changed")}


@pytest_twisted.ensureDeferred
async def test_a_theme_naming_the_home_page_canonical_on_every_page_hides_no_edit(
    tmp_path: Path, clock: Clock
) -> None:
    # A real MkDocs site whose theme override names "/" as every page's canonical
    # (a common template mistake): each page's text is its own, not the home page's.
    pytest.importorskip("mkdocs")
    port = free_port()
    site = DocSite("mkdocs", tmp_path / "site", f"http://127.0.0.1:{port}", pages=6)

    def build() -> None:
        site.build()
        for page in site.out.rglob("*.html"):
            html = page.read_text()
            page.write_text(
                html.replace("<head>", f'<head><link rel="canonical" href="{site.base_url}/">', 1)
            )

    build()
    with nginx(site.out, tmp_path / "nginx", port=port):
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"), clock, INCRECRAWL_LASTMOD_MIN_EVIDENCE=100_000
        )
        first = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert set(map(site.url_of, site.pages)) <= first.changes("new")
        assert "increcrawl/pages/aliases" not in first.stats

        site.edit_page("topic-003")
        build()
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")
        assert site.url_of("topic-003") in second.changes("changed")


@pytest_twisted.ensureDeferred
async def test_an_alias_is_one_whose_text_is_its_crawled_canonical_pages(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):

        def pages(shoes: str, promo: str | None = None) -> dict[str, bytes]:
            return {
                "shoes.html": _page(shoes),
                # A tracking spelling of the same page, canonical to it.
                "shoes-promo.html": _page(promo or shoes, f"{url}/shoes.html"),
                # Canonical to a page of the site that is never crawled: the only copy.
                "boots.html": _page("Boots, in brown", f"{url}/unlisted.html"),
            }

        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock)
        # Run 1: the canonical page alone is listed.
        _site(root, url, pages("Shoes in red"), ["shoes.html", "boots.html"])
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(first) == {("shoes.html", "new"), ("boots.html", "new")}

        # Run 2: the sitemap lists the promo spelling too; its text is the shoes page's.
        _site(root, url, pages("Shoes in red"))
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(second) == set()
        assert second.stats["increcrawl/pages/aliases"] == 1
        # A third of the host's pages: said at the run's end, not only counted.
        assert any("1 of 3 pages checked (33%) are aliases" in line for line in second.log)

        # Run 3: both edited alike: the canonical page's change is reported once.
        _site(root, url, pages("Shoes in blue"))
        clock.advance(LATER)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(third) == {("shoes.html", "changed")}
        with StateStore(db) as store:
            promo = store.get(f"{url}/shoes-promo.html")
            assert promo is not None and promo.content_hash.startswith("alias:")

        # Run 4: the promo page gets text of its own while still naming shoes.html:
        # it is a page of its own, new, and its edits are reported from then on.
        _site(root, url, pages("Shoes in blue", promo="Shoes in blue, two for one"))
        clock.advance(LATER)
        fourth = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(fourth) == {("shoes-promo.html", "new")}
        assert "increcrawl/pages/aliases" not in fourth.stats

        _site(root, url, pages("Shoes in blue", promo="Shoes in blue, three for two"))
        clock.advance(LATER)
        fifth = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(fifth) == {("shoes-promo.html", "changed")}


def _touch(root: Path, at: float) -> None:
    for file in root.iterdir():  # nginx's validators: the file's time, to the second
        os.utime(file, (at, at))


@pytest_twisted.ensureDeferred
async def test_an_alias_fetched_before_its_canonical_page_asks_for_its_text(
    tmp_path: Path, clock: Clock
) -> None:
    # One page at a time, in the sitemap's order: the alias comes first, its canonical
    # page's stored text older than both (its fresh text is asked, or recorded by then).
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):

        def pages(text: str) -> dict[str, bytes]:
            return {"a-promo.html": _page(text, f"{url}/z.html"), "z.html": _page(text)}

        # The adaptive policy has no jitter: both rows due at the same time, in id order.
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=1, INCRECRAWL_POLICY="adaptive"
        )
        _site(root, url, pages("Same text"), ["a-promo.html", "z.html"])
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(first) == {("z.html", "new")}
        assert first.stats["increcrawl/pages/aliases"] == 1

        _site(root, url, pages("Same text, edited on both"), ["a-promo.html", "z.html"])
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(second) == {("z.html", "changed")}
        assert second.stats["increcrawl/pages/aliases"] == 1


@pytest_twisted.ensureDeferred
async def test_an_alias_due_before_its_canonical_page_is_judged_on_its_text_now(
    tmp_path: Path, clock: Clock
) -> None:
    # Both edited alike; the alias is due today, its canonical page tomorrow: judged
    # on the canonical page's stored text, the alias was reported new, then again an
    # alias (from a review).
    root = tmp_path / "www"
    root.mkdir()
    db = str(tmp_path / "s.sqlite")
    with nginx(root, tmp_path / "nginx") as (url, _access):

        def write(text: str) -> None:
            _site(
                root,
                url,
                {"shoes.html": _page(text), "promo.html": _page(text, f"{url}/shoes.html")},
            )
            _touch(root, clock.now)

        settings = crawl_settings(db, clock, CONCURRENT_REQUESTS=1)
        write("Shoes in red")
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(first) == {("shoes.html", "new")}
        write("Shoes in blue")
        clock.advance(DAY)
        with sqlite3.connect(db) as con:
            con.execute(
                "UPDATE pages SET next_check = ? WHERE url LIKE '%/shoes.html'",
                (clock.now + DAY / 2,),
            )
            con.execute("UPDATE pages SET next_check = 0 WHERE url LIKE '%/promo.html'")
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        clock.advance(DAY)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(second) == set()
        assert second.stats["increcrawl/pages/canonical_asked"] == 1  # not due: asked
        assert _reported(third) == {("shoes.html", "changed")}


@pytest_twisted.ensureDeferred
async def test_a_page_naming_a_page_that_is_due_every_run_is_reported(
    tmp_path: Path, clock: Clock
) -> None:
    # A theme mistake: a post names z, edited daily, as canonical, with a text of its
    # own; fetched before z every run (from a review: its verdict, waiting for z,
    # was dropped at every run's end and the post never reported).
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        post = _page("A post of its own", f"{url}/z.html")
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=1)
        seen = []
        for run in range(3):
            _site(root, url, {"a-post.html": post, "z.html": _page(f"Z, edition {run}")})
            _touch(root, clock.now)
            seen.append(_reported(await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")))
            clock.advance(LATER)
        assert seen[0] == {("a-post.html", "new"), ("z.html", "new")}
        assert seen[1:] == [{("z.html", "changed")}] * 2


@pytest_twisted.ensureDeferred
async def test_an_alias_naming_the_https_spelling_of_its_canonical_page_is_an_alias(
    tmp_path: Path, clock: Clock
) -> None:
    # An http site whose pages name their https spellings: the canonical page's row
    # is keyed by its http spelling (from a review: not found, the alias was reported
    # as a page of its own, every edit twice).
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access):
        secure = url.replace("http://", "https://")

        def write(text: str) -> None:
            _site(
                root,
                url,
                {
                    "shoes.html": _page(text, f"{secure}/shoes.html"),  # itself
                    "shoes-promo.html": _page(text, f"{secure}/shoes.html"),  # an alias
                },
            )
            _touch(root, clock.now)

        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, CONCURRENT_REQUESTS=1)
        write("Shoes in red")
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        write("Shoes in blue")
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert _reported(first) == {("shoes.html", "new")}
        assert _reported(second) == {("shoes.html", "changed")}
