"""Real generators and themes (MkDocs Material, furo, the Read the Docs and PyData
themes, Hugo with PaperMod, Jekyll with minima), served by nginx and crawled through
Scrapy with a moved clock: a rebuild that only changes the site's navigation (a
page renamed in it, a page added to it) and really edits one page reports that page
changed, the added one new, and no other (a listing of posts aside: its own content).

VitePress (a build of 10 s) is in ``benchmarks/differential.py``, with the check of
our main content against Chromium's DOM on the same sites.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import pytest_twisted

from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import free_port, nginx, nginx_binary
from tests.support.more_generators import variant_missing, variant_site

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]

LATER = 200 * 86400.0  # every page due again
UNTRUSTED = {"INCRECRAWL_LASTMOD_MIN_EVIDENCE": 100_000}  # every page fetched each run

VARIANTS = [
    "mkdocs material",
    # A template override writes a stray </li> (as Starlette's documentation's does):
    # read as browsers read it, the navigation stays out of the page (#51, 1).
    "mkdocs material + overrides",
    "sphinx furo",
    "sphinx rtd theme",
    "sphinx pydata theme",
    "hugo PaperMod",
    "jekyll minima",
]


@pytest.fixture(params=VARIANTS)
def served(request, tmp_path: Path):
    missing = variant_missing(request.param)
    if missing:
        if os.environ.get("CI") == "true" and "PaperMod" not in request.param:
            pytest.fail(missing)
        pytest.skip(missing)
    port = free_port()
    site = variant_site(request.param, tmp_path / "site", f"http://127.0.0.1:{port}", pages=4)
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port):
        yield site


@pytest_twisted.ensureDeferred
async def test_a_navigation_only_rebuild_reports_only_the_edited_page(
    served, tmp_path: Path, clock: Clock
) -> None:
    site = served
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    sitemap = f"{site.base_url}/sitemap.xml"
    first = await run_crawl(settings, sitemap_url=sitemap)
    assert set(site.urls()) <= first.changes("new")

    site.nav_labels["topic-002"] = "A renamed entry"  # every page's navigation moves
    added = site.add_page()  # and lists one page more
    site.edit_page("topic-003")  # the one real edit
    site.build()
    clock.advance(LATER)
    second = await run_crawl(settings, sitemap_url=sitemap)
    assert second.changes("new") == {site.url_of(added)}
    assert second.changes("changed") - site.listings() == {site.url_of("topic-003")}
    fetched = second.stats["increcrawl/unchanged"] + len(second.items)
    assert fetched >= len(first.items)  # every page read again: none left unseen


@pytest_twisted.ensureDeferred
async def test_an_edited_footnote_is_a_change_of_its_page(tmp_path: Path, clock: Clock) -> None:
    """Sphinx (docutils' HTML5 writer, every theme) writes footnotes as ``<aside
    role="doc-footnote">`` inside the article: the page's own text, not a sidebar."""
    missing = variant_missing("sphinx furo")
    if missing:
        pytest.skip(missing)
    port = free_port()
    site = variant_site("sphinx furo", tmp_path / "site", f"http://127.0.0.1:{port}", pages=3)
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
        sitemap = f"{site.base_url}/sitemap.xml"
        first = await run_crawl(settings, sitemap_url=sitemap)
        some = next(i for i in first.items if i["url"] == site.url_of("topic-002"))
        assert "A footnote." in some["markdown"]
        site.edit_footnote("topic-002")
        site.build()
        clock.advance(LATER)
        second = await run_crawl(settings, sitemap_url=sitemap)
    assert second.changes("changed") == {site.url_of("topic-002")}
