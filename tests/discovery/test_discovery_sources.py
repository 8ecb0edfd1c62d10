"""Every format and rule of discovery through whole ``incremental`` crawls: forgiving
XML, text sitemaps, feeds (never missing), several sources, URL rules, alternates,
robots.txt in both modes, and finding a site's sitemaps."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import CrawlResult, crawl_settings, run_crawl

DAY = 86_400.0
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str) -> bytes:
    return f"<?xml version='1.0'?><urlset {NS}>{''.join(entries)}</urlset>".encode()


def url(loc: str, extra: str = "") -> str:
    return f"<url><loc>{loc}</loc>{extra}</url>"


def rss(*items: tuple[str, str]) -> bytes:
    body = "".join(
        f"<item><title>t</title><link>{link}</link><pubDate>{date}</pubDate></item>"
        for link, date in items
    )
    return (
        f"<?xml version='1.0'?><rss version='2.0'><channel><title>T</title>"
        f"<link>http://x/</link><description>d</description>{body}</channel></rss>"
    ).encode()


class Crawls:
    def __init__(self, site: SampleSite, tmp_path: Path, clock: Clock, api=None) -> None:
        self.site, self.clock, self.api = site, clock, api
        self.db = str(tmp_path / "state.sqlite")

    async def run(self, **arguments: str) -> CrawlResult:
        self.clock.advance(DAY)
        settings = crawl_settings(self.db, self.clock, self.api, **arguments.pop("settings", {}))
        result = await run_crawl(settings, **arguments)
        assert not [line for line in result.log if "Traceback" in line]
        return result

    def rows(self) -> dict[str, tuple]:
        query = "SELECT url, missing_runs, sitemap_lastmod, gone, last_fetched FROM pages"
        return {r[0]: r[1:] for r in sqlite3.connect(self.db).execute(query)}


@pytest_twisted.ensureDeferred
async def test_a_sitemap_with_bare_ampersands_is_read_whole(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    crawls = Crawls(site, tmp_path, clock)
    pages = [site.page_url(i) for i in range(3)]
    sitemap = site.serve(
        "/broken.xml", urlset(url(pages[0] + "?a=1&b=2"), url(pages[1]), url(pages[2]))
    )
    result = await crawls.run(sitemap_url=sitemap)
    assert result.stats["increcrawl/sitemap/recovered"] == 1
    assert "increcrawl/discovery_incomplete" not in result.stats
    assert set(crawls.rows()) == {pages[0] + "?a=1&b=2", pages[1], pages[2]}
    assert any("not well-formed" in line for line in result.log)


@pytest_twisted.ensureDeferred
async def test_a_truncated_sitemap_counts_nothing_missing(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    crawls = Crawls(site, tmp_path, clock)
    pages = [site.page_url(i) for i in range(4)]
    sitemap = site.serve("/s.xml", urlset(*(url(page) for page in pages)))
    await crawls.run(sitemap_url=sitemap)
    cut = urlset(*(url(page) for page in pages))[: -len(b"</loc></url></urlset>") - 3]
    site.serve("/s.xml", cut)
    result = await crawls.run(sitemap_url=sitemap)
    assert result.stats["increcrawl/discovery_incomplete"] == 1
    assert result.stats["increcrawl/sitemap/skipped/truncated"] == 1
    assert all(missing == 0 for missing, *_ in crawls.rows().values())


@pytest_twisted.ensureDeferred
async def test_text_sitemap_and_feeds_from_several_sources(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    crawls = Crawls(site, tmp_path, clock)
    text = site.serve(
        "/sitemap.txt",
        f"# pages\r\n{site.page_url(0)}\r\n\r\n  {site.page_url(1)}  \r\nnot a url\r\n".encode(),
        "text/plain",
    )
    feed = site.serve(
        "/feed.rss",
        rss(
            (site.page_url(2), "Tue, 06 May 2025 07:00:00 +0200"),
            (site.page_url(3), "Mon, 05 May 2025 10:00:00 GMT"),
        ),
        "application/rss+xml",
    )
    atom = site.serve(
        "/atom.xml",
        (
            "<feed xmlns='http://www.w3.org/2005/Atom'><title>A</title>"
            f"<link rel='self' href='{site.url}/atom.xml'/><entry><title>e</title>"
            f"<link href='{site.page_url(4)}'/><updated>2025-05-07T00:00:00Z</updated>"
            "</entry></feed>"
        ).encode(),
    )
    # Comma-separated sources of each kind, one seed.
    result = await crawls.run(sitemap_url=f"{text}, {atom}", feed_url=feed)
    rows = crawls.rows()
    assert set(rows) == {site.page_url(i) for i in range(5)}
    assert result.stats["increcrawl/sitemap/feeds"] == 2
    assert result.stats["increcrawl/sitemap/skipped/not_url"] == 1
    # A feed's dates make a page due when newer than its last fetch; they are not
    # kept as its date (tests/schedule/test_feed_dates.py).
    assert rows[site.page_url(2)][1] is None and rows[site.page_url(4)][1] is None
    assert len({r[0] for r in sqlite3.connect(crawls.db).execute("SELECT seed FROM pages")}) == 1

    # The feed moves on (page 3 falls off it), the text sitemap drops page 1: only
    # the sitemap's page counts as missing.
    site.serve("/feed.rss", rss((site.page_url(2), "Tue, 06 May 2025 07:00:00 +0200")))
    site.serve("/sitemap.txt", f"{site.page_url(0)}\n".encode(), "text/plain")
    result = await crawls.run(sitemap_url=f"{text}, {atom}", feed_url=feed)
    rows = crawls.rows()
    assert rows[site.page_url(1)][0] == 1
    assert rows[site.page_url(3)][0] == 0
    assert result.stats["increcrawl/missing"] == 1


@pytest_twisted.ensureDeferred
async def test_url_rules_and_alternates(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    crawls = Crawls(site, tmp_path, clock)
    alternate = f'<xhtml:link rel="alternate" hreflang="fr" href="{site.page_url(9)}"/>'
    child = site.serve(
        "/child-a.xml",
        urlset(
            *(url(site.page_url(i)) for i in range(4)), url(site.page_url(5), alternate)
        ).replace(b"<urlset ", b'<urlset xmlns:xhtml="http://www.w3.org/1999/xhtml" '),
    )
    other = site.serve("/child-b.xml", urlset(url(site.page_url(7))))
    index = site.serve(
        "/index.xml",
        f"<sitemapindex {NS}><sitemap><loc>{child}</loc></sitemap>"
        f"<sitemap><loc>{other}</loc></sitemap></sitemapindex>".encode(),
    )
    rules = {
        "INCRECRAWL_DENY": [r"/page/3$"],
        "INCRECRAWL_SITEMAP_FOLLOW": ["child-a"],
        "INCRECRAWL_SITEMAP_ALTERNATES": True,
    }
    result = await crawls.run(sitemap_url=index, settings=rules)
    expected = {site.page_url(i) for i in (0, 1, 2, 5, 9)}
    assert set(crawls.rows()) == expected
    assert result.stats["increcrawl/sitemap/skipped/denied"] == 1
    assert result.stats["increcrawl/sitemap/not_followed"] == 1
    assert result.changes("new") == expected

    # A rule added later: the row stays, is neither fetched nor counted missing.
    clock.advance(40 * DAY)  # everything due
    rules["INCRECRAWL_ALLOW"] = [r"/page/[0-2]$", r"/page/9$"]
    result = await crawls.run(sitemap_url=index, settings=rules)
    assert result.stats["increcrawl/skipped/excluded"] == 1
    assert result.stats["increcrawl/sitemap/skipped/not_allowed"] == 1
    assert site.page_url(5) not in {item["url"] for item in result.items}
    rows = crawls.rows()
    assert rows[site.page_url(5)][0] == 0 and not rows[site.page_url(5)][2]


async def robots_disallow_story(crawls: Crawls, site: SampleSite, **settings: object) -> None:
    site.serve(
        "/robots.txt",
        f"User-agent: *\nDisallow: /page/2\nSitemap: {site.sitemap_url}\n".encode(),
        "text/plain",
    )
    result = await crawls.run(sitemap_url=site.sitemap_url, settings=settings)
    assert result.stats["increcrawl/skipped/robots"] == 1
    assert "increcrawl/errors" not in result.stats
    assert site.fetched["/page/2"] == 0
    assert result.changes("new") == set(site.page_urls()) - {site.page_url(2)}
    missing, _lastmod, gone, fetched = crawls.rows()[site.page_url(2)]
    assert (missing, gone, fetched) == (0, 0, None)


@pytest_twisted.ensureDeferred
async def test_robots_txt_direct(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    await robots_disallow_story(Crawls(site, tmp_path, clock), site)


@pytest_twisted.ensureDeferred
async def test_robots_txt_geonode_single_and_batch(
    site: SampleSite, api: GeonodeStandIn, tmp_path: Path, clock: Clock
) -> None:
    await robots_disallow_story(Crawls(site, tmp_path / "a", clock, api), site)
    assert all("/page/2" not in e["body"].get("url", "") for e in api.counters()["bodies"])
    site.reset_counters()
    (tmp_path / "b").mkdir()
    await robots_disallow_story(
        Crawls(site, tmp_path / "b", clock, api), site, GEONODE_BATCH_MIN_URLS=1
    )
    assert api.counters()["requests"].get("POST /v1/batch", 0) >= 1


@pytest_twisted.ensureDeferred
async def test_site_url_finds_the_sitemaps_without_a_key(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    # From robots.txt's Sitemap: lines.
    result = await Crawls(site, tmp_path, clock).run(site_url=f"{site.url}/")
    assert result.changes("new") == set(site.page_urls())
    assert any("from its robots.txt" in line for line in result.log)
    # None declared: at a well-known path (here a text sitemap).
    site.hide_sitemaps()
    site.serve("/sitemap.txt", f"{site.page_url(0)}\n{site.page_url(1)}\n".encode(), "text/plain")
    (tmp_path / "b").mkdir()
    result = await Crawls(site, tmp_path / "b", clock).run(site_url=f"{site.url}/")
    assert result.changes("new") == {site.page_url(0), site.page_url(1)}
    assert any("at well-known paths: " + site.url + "/sitemap.txt" in line for line in result.log)
    # None at all, and no key: the run says so and ends with discovery_failed.
    site.serve("/sitemap.txt", b"<html><body>Not found</body></html>", "text/html")  # soft 404
    (tmp_path / "c").mkdir()
    result = await Crawls(site, tmp_path / "c", clock).run(site_url=f"{site.url}/")
    assert result.reason == "discovery_failed"
    assert any(
        line.startswith("ERROR") and "No sitemap or feed found" in line for line in result.log
    )


@pytest_twisted.ensureDeferred
async def test_entity_cut_locs_and_news_dates(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    crawls = Crawls(site, tmp_path, clock)
    news = (
        '<news:news xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">'
        "<news:publication_date>2025-05-01T10:00:00+02:00</news:publication_date></news:news>"
    )
    body = (
        f'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x "evil">]><urlset {NS}>'
        f"{url(site.url + '/&x;page/1')}{url(site.page_url(1), news)}</urlset>"
    ).encode()
    result = await crawls.run(sitemap_url=site.serve("/news.xml", body))
    rows = crawls.rows()
    assert set(rows) == {site.page_url(1)}  # never the site root
    assert result.stats["increcrawl/sitemap/skipped/entity"] == 1
    assert rows[site.page_url(1)][1] == "2025-05-01T08:00:00Z"


@pytest_twisted.ensureDeferred
async def test_an_index_may_list_a_feed(site: SampleSite, tmp_path: Path, clock: Clock) -> None:
    crawls = Crawls(site, tmp_path, clock)
    feed = site.serve("/feed/", rss((site.page_url(6), "Mon, 05 May 2025 10:00:00 GMT")))
    index = site.serve(
        "/index.xml",
        f"<sitemapindex {NS}><sitemap><loc>{site.sitemap_url}</loc></sitemap>"
        f"<sitemap><loc>{feed}</loc></sitemap></sitemapindex>".encode(),
    )
    result = await crawls.run(sitemap_url=index)
    assert result.changes("new") == set(site.page_urls())
    assert result.stats["increcrawl/sitemap/feeds"] == 1


@pytest_twisted.ensureDeferred
async def test_the_discoverer_needs_no_spider_and_returns_what_it_found(
    tmp_path: Path,
) -> None:
    """Its inputs are explicit, its result returned: the roots found (before the walk,
    so a walk the state stops leaves them to the spider) and whether they are complete."""
    from scrapy.http import TextResponse

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.discovery.sources import Discoverer, DiscoveryInputs, parse_sources
    from increcrawl_scrapy.discovery.url_rules import UrlRules
    from increcrawl_scrapy.scope import Scope
    from increcrawl_scrapy.state import StateStore

    robots = b"Sitemap: https://example.com/news.xml\n"
    asked: list[str] = []

    async def fetch(address: str, headers: dict[str, str] | None) -> TextResponse:
        asked.append(address)
        found = address == "https://example.com/robots.txt"
        return TextResponse(address, body=robots if found else b"", status=200 if found else 404)

    stopped: list[tuple[str, str]] = []
    inputs = DiscoveryInputs(
        sources=parse_sources(
            site_url="https://example.com/", sitemap_url="https://example.com/s.xml"
        ),
        fetch=fetch,
        sitemap_scope=Scope("example.com"),
        page_scope=Scope("example.com"),
        config=IncrecrawlConfig.from_settings({}),
        rules=UrlRules(),
        digest_salt=b"",
        origin="https://example.com",
        stats=None,
        client=None,
        stop=lambda reason, why: stopped.append((reason, why)),
    )
    with StateStore(tmp_path / "s.sqlite") as store:
        roots = await Discoverer(inputs, store.start_run("https://example.com/")).roots()
    assert roots.urls == ("https://example.com/news.xml", "https://example.com/s.xml")
    assert roots.complete and roots.mapped == 0 and not stopped
    assert asked[0] == "https://example.com/robots.txt"
