"""Sites built by real generators (MkDocs, Sphinx, Hugo) and served by nginx: a
page's change is its own content, not the site's navigation, sidebar or footer.

Each story runs whole crawls through Scrapy with a moved clock: the site grows by a
page (every page's navigation lists it), a page is edited, a page is removed, the
footer's year moves, the theme changes; a sitemap entry the server does not have.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.testing import GeonodeStandIn
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import free_port, nginx, nginx_binary
from tests.support.generators import THEMES, DocSite

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

LATER = 200 * 86400.0  # every page due again (INCRECRAWL_STABLE_MAX_INTERVAL: 180 days)
#: Sitemap dates not trusted in these stories: every page is fetched each run, so
#: "no change reported" is never "nothing fetched".
UNTRUSTED = {"INCRECRAWL_LASTMOD_MIN_EVIDENCE": 100_000}


def _available(generator: str) -> bool:
    if generator == "hugo":
        return shutil.which("hugo") is not None
    try:
        __import__(generator)
    except ImportError:
        return False
    return True


@pytest.fixture(params=["mkdocs", "sphinx", "hugo"])
def served(request, tmp_path: Path):
    generator = request.param
    if not _available(generator):
        if os.environ.get("CI") == "true":  # CI installs them: missing is a failure there
            pytest.fail(f"{generator} is not installed")
        pytest.skip(f"{generator} is not installed (.ci/run installs it)")
    # nginx serves the build folder, which is rebuilt in place between runs.
    port = free_port()
    site = DocSite(generator, tmp_path / "site", f"http://127.0.0.1:{port}", pages=12)
    site.build()
    with nginx(site.out, tmp_path / "nginx", port=port) as (url, _access):
        assert url == site.base_url
        yield site


def neighbours(site: DocSite, slug: str) -> set[str]:
    """The pages whose previous/next links name *slug* (sorted order, as built)."""
    order = sorted({*site.pages, slug})
    at = order.index(slug)
    near = {site.url_of(s) for s in order[max(at - 1, 0) : at + 2] if s != slug}
    return near | site.listings()


async def _run(site: DocSite, settings: dict) -> object:
    return await run_crawl(settings, sitemap_url=f"{site.base_url}/sitemap.xml")


@pytest_twisted.ensureDeferred
async def test_growth_edits_removal_footer_and_theme_report_only_real_changes(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    site = served
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _run(site, settings)
    assert first.changes("new") == {*site.urls(), *site.listings()}
    # Each item's markdown is the page's own content: no other page's title in it.
    some = next(i for i in first.items if i["url"] == site.url_of("topic-003"))
    assert site.pages["topic-003"].title in some["markdown"]
    assert site.pages["topic-009"].title not in some["markdown"]

    # The site grows by a page (listed in every page's navigation) and one is edited.
    added = site.add_page()
    site.edit_page("topic-004")
    site.build()
    clock.advance(LATER)
    second = await _run(site, settings)
    assert second.changes("new") == {site.url_of(added)}
    assert site.url_of("topic-004") in second.changes("changed")
    assert second.changes("changed") - {site.url_of("topic-004")} <= neighbours(site, added)
    assert second.stats["increcrawl/unchanged"] >= len(site.urls()) - 3

    # A page removed: gone, its neighbours at most changed.
    site.remove_page("topic-007")
    site.build()
    clock.advance(LATER)
    third = await _run(site, settings)
    assert third.changes("changed") <= neighbours(site, "topic-007")

    # A new footer year and a new theme: every page's template moved, none changed.
    site.footer_year += 1
    site.theme = THEMES[site.generator][1]
    site.build()
    clock.advance(LATER)
    fourth = await _run(site, settings)
    assert fourth.changes("changed") == set()
    assert fourth.stats["increcrawl/unchanged"] == len(site.urls()) + len(site.listings())

    # And a real edit after all that is still seen.
    site.edit_page("topic-002")
    site.build()
    clock.advance(LATER)
    fifth = await _run(site, settings)
    assert fifth.changes("changed") == {site.url_of("topic-002")}


@pytest_twisted.ensureDeferred
async def test_geonode_takes_the_same_main_content_as_a_direct_fetch(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    site = served
    db = str(tmp_path / "s.sqlite")
    direct = crawl_settings(db, clock, **UNTRUSTED)
    first = await _run(site, direct)
    with GeonodeStandIn(api_keys=["test-key-0123456789"]) as api:
        # Switching fetchers reports nothing: both take the page's text the same way.
        clock.advance(LATER)
        geonode = crawl_settings(db, clock, api, **UNTRUSTED)
        second = await _run(site, geonode)
        assert second.items == []
        assert second.stats["increcrawl/unchanged"] == len(first.items)
        assert api.counters()["requests"]["POST /v1/extract"] == len(first.items)

        added = site.add_page()
        site.edit_page("topic-005")
        site.build()
        clock.advance(LATER)
        third = await _run(site, geonode)
        assert third.changes("new") == {site.url_of(added)}
        assert site.url_of("topic-005") in third.changes("changed")
        assert third.changes("changed") - {site.url_of("topic-005")} <= neighbours(site, added)
        assert {i["fetcher"] for i in third.items} == {"geonode"}

        # Through a batch job too (many pages at once).
        site.theme = THEMES[site.generator][1]
        site.build()
        clock.advance(LATER)
        batched = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=2, **UNTRUSTED)
        fourth = await _run(site, batched)
        assert fourth.changes("changed") == set()
        assert api.counters()["requests"].get("POST /v1/batch", 0) >= 1


@pytest_twisted.ensureDeferred
async def test_a_state_fingerprinted_the_old_way_takes_new_baselines_in_the_next_run(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    site = served
    db = str(tmp_path / "s.sqlite")
    # The whole page's text, as this package took it before main content.
    whole = crawl_settings(db, clock, INCRECRAWL_MAIN_CONTENT=False, **UNTRUSTED)
    first = await _run(site, whole)
    pages = len(first.items)
    assert any("Topic 9" in i["markdown"] for i in first.items if "topic-003" in i["url"])

    clock.advance(LATER)
    upgraded = crawl_settings(db, clock, **UNTRUSTED)
    # Nothing rebuilt (nginx would answer 304): each page is read whole all the same,
    # and its new fingerprint taken then; every fingerprint moved, none of it is a change.
    second = await _run(site, upgraded)
    assert second.items == []
    assert second.stats["increcrawl/pages/rebaselined"] == pages

    site.build()  # the same pages written again: 200s, fingerprinted the new way
    clock.advance(LATER)
    third = await _run(site, upgraded)
    assert third.items == []
    assert "increcrawl/pages/rebaselined" not in third.stats

    site.add_page()
    site.edit_page("topic-006")
    site.build()
    clock.advance(LATER)
    fourth = await _run(site, upgraded)
    assert site.url_of("topic-006") in fourth.changes("changed")
    assert fourth.changes("changed") <= {site.url_of("topic-006"), *neighbours(site, "topic-013")}
    assert "increcrawl/pages/rebaselined" not in fourth.stats


@pytest_twisted.ensureDeferred
async def test_a_sitemap_entry_the_server_does_not_have_is_not_reported_gone(
    served: DocSite, tmp_path: Path, clock: Clock
) -> None:
    """A deploy that lists a page nginx does not have (its file missing): the first
    crawl reports the others new and that one nothing; once the file is there, it is
    new. A page seen before that goes missing is gone."""
    site = served
    missing = site.url_of("topic-005")
    built = site.out / ("topic-005.html" if site.generator == "sphinx" else "topic-005")
    shutil.rmtree(built) if built.is_dir() else built.unlink()
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _run(site, settings)
    assert first.changes("new") == {*site.urls(), *site.listings()} - {missing}
    assert not first.changes("gone") and first.stats["increcrawl/pages/never_found"] == 1
    site.build()  # the file is back
    clock.advance(LATER)
    second = await _run(site, settings)
    assert second.changes("new") == {missing} and not second.changes("gone")
    site.remove_page("topic-006")
    site.build()
    clock.advance(LATER)
    third = await _run(site, settings)
    assert site.url_of("topic-006") in third.changes("gone")
