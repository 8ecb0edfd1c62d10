"""Stories of several runs through whole crawls, with a moved clock: pages never
lost, stuck or fetched for ever; redirects and API redirects never leave the host."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler
from tests.canary import Canary
from tests.conftest import Clock
from tests.crawling import KEY, CrawlResult, crawl_settings, run_crawl

DAY = 86_400.0
HOUR = 3_600.0
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


@pytest.fixture
def servers():
    with SampleSite(pages=8) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        yield site, api


def row(db: str, url: str):
    with StateStore(db) as store:
        return store.get(url)


async def crawl(settings: dict, reason: str = "finished", **args) -> CrawlResult:
    result = await run_crawl(settings, **args)
    assert result.reason == reason, result.log[-20:]
    return result


# -- redirects ---------------------------------------------------------------------


@pytest.mark.parametrize("fetcher", ["direct", "geonode"])
@pytest_twisted.ensureDeferred
async def test_a_redirect_to_another_site_is_an_error_for_that_page(
    servers, tmp_path: Path, clock: Clock, fetcher: str
) -> None:
    site, api = servers
    db = str(tmp_path / "s.sqlite")
    with Canary() as other:
        site.redirect(2, f"{other.url}/elsewhere")
        site.redirect(3, site.page_url(5), status=301)  # within the site: followed
        settings = crawl_settings(db, clock, api if fetcher == "geonode" else None)
        result = await crawl(settings, sitemap_url=site.sitemap_url)
        if fetcher == "direct":
            assert other.hits == []  # never contacted by the crawler
    assert site.page_url(2) not in {item["url"] for item in result.items}
    assert result.stats["increcrawl/redirect/offsite"] == 1
    stuck = row(db, site.page_url(2))
    assert stuck.last_fetched is None and not stuck.gone and stuck.error_streak == 1
    moved = next(item for item in result.items if item["url"] == site.page_url(3))
    assert moved["change"] == "new" and moved["final_url"] == site.page_url(5)
    assert row(db, site.page_url(3)).final_url == site.page_url(5)


@pytest_twisted.ensureDeferred
async def test_the_api_key_never_follows_an_api_redirect(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    with Canary() as other:

        class Redirecting(QuietHandler):
            def do_POST(self) -> None:
                self.send_body(307, b"", "text/plain", {"Location": f"{other.url}/v1/extract"})

        api = LoopbackServer(Redirecting)
        api.start()
        try:
            settings = crawl_settings(
                str(tmp_path / "s.sqlite"),
                clock,
                GEONODE_MAX_RETRIES=0,
                INCRECRAWL_FETCHER="geonode",
            )
            settings.update(GEONODE_API_URL=api.url, GEONODE_API_KEY=KEY)
            result = await crawl(settings, "too_many_errors", sitemap_url=site.sitemap_url)
        finally:
            api.stop()
        assert other.hits == []
    assert result.items == [] and result.stats["increcrawl/errors"] == 12
    assert any(f"redirected to {other.url}/v1/extract" in line for line in result.log)


# -- seeds, normalization, gone pages, back-off --------------------------------


@pytest_twisted.ensureDeferred
async def test_pages_follow_the_seed_that_lists_them_now(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, _api = servers
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock)
    first = await crawl(settings, sitemap_url=site.sitemap_url)
    assert len(first.changes("new")) == 8
    clock.advance(2 * DAY)
    # The same site, now seeded from its robots.txt: every page is due again.
    second = await crawl(settings, robots_url=site.robots_url)
    assert second.stats["increcrawl/due"] == 8
    assert len(second.items) + second.stats.get("increcrawl/unchanged", 0) >= 8
    with sqlite3.connect(db) as conn:
        seeds = {seed for (seed,) in conn.execute("SELECT DISTINCT seed FROM pages")}
    assert seeds == {site.robots_url}


@pytest_twisted.ensureDeferred
async def test_changing_a_normalization_setting_rekeys_instead_of_splitting_rows(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, _api = servers
    listing = "".join(f"<url><loc>{site.page_url(i)}/</loc></url>" for i in range(4))
    sitemap = site.serve("/slash.xml", f"<urlset {NS}>{listing}</urlset>".encode())
    db = str(tmp_path / "s.sqlite")
    await crawl(crawl_settings(db, clock), sitemap_url=sitemap)
    off = crawl_settings(db, clock, INCRECRAWL_STRIP_TRAILING_SLASH=False)
    clock.advance(2 * DAY)
    second = await crawl(off, sitemap_url=sitemap)
    assert second.changes("new") == set()
    assert second.stats["increcrawl/rekeyed"] == 4
    assert any("normalization settings changed" in line for line in second.log)
    clock.advance(HOUR)
    third = await crawl(off, sitemap_url=sitemap)
    assert third.stats.get("increcrawl/due", 0) == 0 and third.items == []
    with sqlite3.connect(db) as conn:
        keys = {key for (key,) in conn.execute("SELECT normalized_url FROM pages")}
    assert keys == {f"{site.page_url(i)}/" for i in range(4)}


@pytest.mark.parametrize("fetcher", ["direct", "geonode"])
@pytest_twisted.ensureDeferred
async def test_a_page_that_404s_once_comes_back(
    servers, tmp_path: Path, clock: Clock, fetcher: str
) -> None:
    site, api = servers
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api if fetcher == "geonode" else None)
    await crawl(settings, sitemap_url=site.sitemap_url)
    site.delete(2)  # has a lastmod
    site.delete(3, status=410)  # has none
    clock.advance(2 * DAY)
    second = await crawl(settings, sitemap_url=site.sitemap_url)
    assert second.changes("gone") == {site.page_url(2), site.page_url(3)}
    site.restore(2)
    site.restore(3)
    site.edit(2)  # back, edited: its lastmod moves
    clock.advance(HOUR)
    third = await crawl(settings, sitemap_url=site.sitemap_url)
    assert third.changes("new") == {site.page_url(2)}
    clock.advance(2 * DAY)  # page 3's slow re-check
    fourth = await crawl(settings, sitemap_url=site.sitemap_url)
    assert site.page_url(3) in fourth.changes("new")
    assert not row(db, site.page_url(3)).gone


@pytest_twisted.ensureDeferred
async def test_failing_pages_never_starve_the_others(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=10) as site:
        for i in (0, 1, 2):  # first in the queue's order
            site.fail(i, 403)
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, INCRECRAWL_MAX_FETCHES=3)
        fetched: set[str] = set()
        for run in range(4):
            # The first run fetches only the failing three: every fetch failed (exit 6).
            reason = "too_many_errors" if run == 0 else "finished"
            result = await crawl(settings, reason, sitemap_url=site.sitemap_url)
            fetched |= result.changes("new")
            clock.advance(60)
        assert fetched == {site.page_url(i) for i in range(3, 10)}


@pytest_twisted.ensureDeferred
async def test_validators_a_fetcher_cannot_refresh_never_hide_a_revert(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    db = str(tmp_path / "s.sqlite")
    original = site.text(0)  # page 0 has an ETag
    await crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
    assert row(db, site.page_url(0)).etag == site.etag(0)
    geonode = crawl_settings(db, clock, api)
    site.edit(0, text="An edit seen through the API, which returns no validators.")
    clock.advance(2 * DAY)
    assert site.page_url(0) in (await crawl(geonode, sitemap_url=site.sitemap_url)).changes(
        "changed"
    )
    site.edit(0, text=original)  # back to the text the stored ETag describes
    clock.advance(2 * DAY)
    third = await crawl(geonode, sitemap_url=site.sitemap_url)
    assert site.page_url(0) in third.changes("changed")


@pytest_twisted.ensureDeferred
async def test_batch_results_land_on_the_row_that_asked(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    site.redirect(3, site.page_url(6))  # the API answers with the final URL
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=2)
    result = await crawl(settings, sitemap_url=site.sitemap_url)
    assert result.stats["geonode/batch/jobs"] == 1
    item = next(i for i in result.items if i["url"] == site.page_url(3))
    assert item["fetcher"] == "geonode-batch" and item["final_url"] == site.page_url(6)
    assert row(db, site.page_url(3)).last_fetched is not None
    with StateStore(db, clock=clock) as store:
        assert store.due(store.runs()[0]["seed"]) == []


@pytest_twisted.ensureDeferred
async def test_a_failed_batch_job_keeps_its_completed_pages(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.configure(batch_job_fails=True)
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, api, GEONODE_BATCH_MIN_URLS=2)
    result = await crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.changes("new")) == 8 and result.stats["increcrawl/batch/failed"] == 1


@pytest_twisted.ensureDeferred
async def test_a_batch_job_running_at_shutdown_is_cancelled(
    servers, tmp_path: Path, clock: Clock
) -> None:
    site, api = servers
    api.configure(batch_stall=True)
    settings = crawl_settings(
        str(tmp_path / "s.sqlite"), clock, api, GEONODE_BATCH_MIN_URLS=2, CLOSESPIDER_TIMEOUT=1
    )
    result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert result.reason == "closespider_timeout"
    assert api.counters()["requests"].get("DELETE /v1/batch/{job_id}") == 1
    assert result.stats["increcrawl/batch/cancelled"] == 1


# -- discovery: every source, settings in the digest, cross-submitted sitemaps ------


@pytest_twisted.ensureDeferred
async def test_every_source_is_read_when_one_fails(servers, tmp_path: Path, clock: Clock) -> None:
    site, _api = servers
    site.fail_path("/robots.txt", 500)
    result = await run_crawl(
        crawl_settings(str(tmp_path / "s.sqlite"), clock),
        robots_url=site.robots_url,
        sitemap_url=site.sitemap_url,
    )
    assert len(result.changes("new")) == 8  # the sitemap was still read
    assert result.stats["increcrawl/discovery_incomplete"] == 1
    assert "increcrawl/missing" not in result.stats


@pytest_twisted.ensureDeferred
async def test_a_settings_change_reapplies_an_identical_sitemap(
    tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=2) as site:
        port = site.url.rsplit(":", 1)[1]
        local = f"http://localhost:{port}"
        sitemap = site.serve(
            "/sub.xml",
            f"<urlset {NS}><url><loc>{local}/page/1</loc></url>"
            f"<url><loc>http://www.localhost:{port}/page/2</loc></url></urlset>".encode(),
        )
        db = str(tmp_path / "s.sqlite")
        args = {"sitemap_url": sitemap.replace(site.url, local), "discover_only": "1"}
        first = await crawl(crawl_settings(db, clock), **args)
        assert first.stats["increcrawl/discovered"] == 1
        wider = crawl_settings(db, clock, INCRECRAWL_INCLUDE_SUBDOMAINS=True)
        second = await crawl(wider, **args)
        assert second.stats["increcrawl/discovered"] == 2
        assert "increcrawl/sitemap/unchanged" not in second.stats
        third = await crawl(wider, **args)  # same settings, same bytes: skipped
        assert third.stats["increcrawl/sitemap/unchanged"] == 1


@pytest.mark.parametrize("declared", [False, True])
@pytest_twisted.ensureDeferred
async def test_a_child_sitemap_on_another_host_needs_the_seeds_robots_txt(
    servers, tmp_path: Path, clock: Clock, declared: bool
) -> None:
    site, _api = servers
    listing = "".join(f"<url><loc>{site.page_url(i)}</loc></url>" for i in range(3))
    site.serve("/cdn-sitemap.xml", f"<urlset {NS}>{listing}</urlset>".encode())
    # The same server under another name plays the CDN that hosts the sitemap.
    child = site.url.replace("127.0.0.1", "localhost") + "/cdn-sitemap.xml"
    index = site.serve(
        "/index.xml",
        f"<sitemapindex {NS}><sitemap><loc>{child}</loc></sitemap></sitemapindex>".encode(),
    )
    robots = f"User-agent: *\nAllow: /\nSitemap: {index}\n"
    site.serve("/robots.txt", (robots + (f"Sitemap: {child}\n" if declared else "")).encode())
    result = await crawl(crawl_settings(str(tmp_path / "s.sqlite"), clock), sitemap_url=index)
    if declared:  # cross-submission: the CDN's sitemap lists the seed's pages
        assert site.requested["/cdn-sitemap.xml"] == 1
        assert len(result.changes("new")) == 3
        assert "increcrawl/discovery_incomplete" not in result.stats
    else:
        assert site.requested["/cdn-sitemap.xml"] == 0
        assert result.stats["increcrawl/sitemap/offsite"] == 1
        assert result.stats["increcrawl/discovery_incomplete"] == 1
        assert any("not on 127.0.0.1" in line for line in result.log)


# -- decoding, configuration ---------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_charset_only_in_the_header_is_decoded(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    page = site.serve(
        "/creme",
        "<html><body><p>La crème brûlée</p></body></html>".encode("cp1252"),
        "text/html; charset=windows-1252",
    )
    sitemap = site.serve("/c.xml", f"<urlset {NS}><url><loc>{page}</loc></url></urlset>".encode())
    result = await crawl(crawl_settings(str(tmp_path / "s.sqlite"), clock), sitemap_url=sitemap)
    [item] = result.items
    assert "La crème brûlée" in item["markdown"]


@pytest_twisted.ensureDeferred
async def test_the_api_url_is_read_from_the_environment_like_the_key(
    servers, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    site, api = servers
    monkeypatch.setenv("GEONODE_API_URL", api.url)
    monkeypatch.setenv("GEONODE_API_KEY", KEY)
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
    del settings["INCRECRAWL_FETCHER"]  # auto: the key in the environment decides
    result = await crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.changes("new")) == 8
    assert api.counters()["requests"]["POST /v1/extract"] == 8
    assert any(f"Geonode API at {api.url}" in line for line in result.log)
    assert not any(KEY in line for line in result.log)


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize(
    "setting",
    [
        {"INCRECRAWL_REVIVE_GONE": True},
        {"INCRECRAWL_CONTENT_WORKER": "process", "INCRECRAWL_CONTENT_TIMEOUT": 5},
    ],
)
async def test_a_deprecated_setting_is_a_no_op_said_once(
    servers, tmp_path: Path, clock: Clock, setting: dict
) -> None:
    site, _api = servers
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **setting)
    result = await crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.changes("new")) == 8
    for name in setting:
        said = [line for line in result.log if f"{name} is deprecated and does nothing" in line]
        # A warning of its own, repeated in the run summary's warnings.
        assert len([line for line in said if line.startswith("WARNING")]) == 1, said
    assert not any("Unknown setting" in line for line in result.log)
