"""A seed given as the bare host of a site served from ``www.`` (nginx answers the
bare name with a 301 to ``www.``, as most hosts are set up): the seed's site is what
its redirects say it is, and a run that keeps nothing of a sitemap that listed URLs
says so, with a close reason cron can read (#53, 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy import close_reasons
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.discovery.loopback_names import loopback_names
from tests.servers import free_port, nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


@pytest.fixture(autouse=True)
def _names():
    with loopback_names():
        yield


NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
#: The bare name answers with a 301 to www., the way hosting panels set it up.
TO_WWW = "if ($host = localhost) { return 301 http://www.localhost:$server_port$request_uri; }"


def write_site(root: Path, port: int, pages: list[str], host: str = "www.localhost") -> None:
    root.mkdir(parents=True, exist_ok=True)
    for name in pages:
        (root / f"{name}.html").write_text(
            f"<html><head><title>{name}</title></head><body><main><h1>{name}</h1>"
            f"<p>{'The page called ' + name + ' says something of its own. ' * 12}</p>"
            "</main></body></html>"
        )
    entries = "".join(f"<url><loc>http://{host}:{port}/{name}.html</loc></url>" for name in pages)
    (root / "sitemap.xml").write_text(f"<urlset {NS}>{entries}</urlset>")


@pytest_twisted.ensureDeferred
async def test_a_bare_seed_of_a_www_site_discovers_its_pages(tmp_path: Path, clock: Clock) -> None:
    port = free_port()
    write_site(tmp_path / "site", port, ["a", "b", "c"])
    with nginx(tmp_path / "site", tmp_path / "nginx", port=port, extra=TO_WWW):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        result = await run_crawl(settings, sitemap_url=f"http://localhost:{port}/sitemap.xml")
    assert result.reason == "finished", result.log[-20:]
    assert result.changes("new") == {f"http://www.localhost:{port}/{n}.html" for n in "abc"}
    assert "increcrawl/sitemap/skipped/offsite" not in result.stats


@pytest_twisted.ensureDeferred
async def test_a_sitemap_whose_every_url_is_refused_is_said_and_ends_the_run_so(
    tmp_path: Path, clock: Clock
) -> None:
    port = free_port()
    # The sitemap lists another site's pages only (no redirect says they are the seed's).
    write_site(tmp_path / "site", port, ["a", "b"], host="elsewhere.localhost")
    with nginx(tmp_path / "site", tmp_path / "nginx", port=port):
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        result = await run_crawl(settings, sitemap_url=f"http://localhost:{port}/sitemap.xml")
    assert result.items == []
    assert result.reason == close_reasons.NOTHING_DISCOVERED
    assert close_reasons.exit_code([result.reason]) == 3
    warnings = [line for line in result.log if line.startswith("WARNING") and "offsite" in line]
    assert len(warnings) == 1, result.log
    assert "2" in warnings[0]


@pytest_twisted.ensureDeferred
async def test_a_site_that_moves_to_www(tmp_path: Path, clock: Clock) -> None:
    port = free_port()
    bare = tmp_path / "bare"
    write_site(bare, port, ["a", "b"], host="localhost")
    db = str(tmp_path / "s.sqlite")
    seed = f"http://localhost:{port}/sitemap.xml"
    with nginx(bare, tmp_path / "nginx1", port=port):
        first = await run_crawl(crawl_settings(db, clock), sitemap_url=seed)
    assert first.changes("new") == {f"http://localhost:{port}/{n}.html" for n in "ab"}
    moved = tmp_path / "www"
    write_site(moved, port, ["a", "b", "c"])
    runs = []
    with nginx(moved, tmp_path / "nginx2", port=port, extra=TO_WWW):
        for _day in range(8):
            clock.advance(86_400)
            runs.append(await run_crawl(crawl_settings(db, clock), sitemap_url=seed))
    assert f"http://www.localhost:{port}/c.html" in runs[0].changes("new")
    gone = set().union(*(r.changes("gone") for r in runs))
    assert gone == {f"http://localhost:{port}/{n}.html" for n in "ab"}


@pytest.mark.parametrize(("status", "gone"), [(301, True), (308, True), (302, False), (307, False)])
@pytest_twisted.ensureDeferred
async def test_a_page_the_sitemap_dropped_is_gone_when_it_moved_for_good(
    tmp_path: Path, clock: Clock, status: int, gone: bool
) -> None:
    from increcrawl_scrapy.testing import SampleSite

    with SampleSite(pages=4) as site:
        db = str(tmp_path / "s.sqlite")
        await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
        site.drop_from_sitemap(1)
        site.redirect(1, site.page_url(2), status=status)  # its content merged into 2's
        seen = []
        for _day in range(8):
            clock.advance(86_400)
            result = await run_crawl(crawl_settings(db, clock), sitemap_url=site.sitemap_url)
            seen += [(item["change"], item["url"]) for item in result.items]
        moved, target = site.page_url(1), site.page_url(2)
    assert (("gone", moved) in seen) is gone, seen
    assert ("gone", target) not in seen


@pytest_twisted.ensureDeferred
async def test_a_healthy_run_whose_only_changed_sitemap_is_denied_ends_finished(
    tmp_path: Path, clock: Clock
) -> None:
    """An index of an unchanged posts' sitemap and a tags' sitemap the project denies,
    changed by a new tag: nothing is new and every refusal is the user's own rule, so
    the run is healthy (and its discovery complete: deletions are still found)."""
    from increcrawl_scrapy.testing import SampleSite

    def urlset(urls: list[str]) -> bytes:
        return (
            f"<urlset {NS}>{''.join(f'<url><loc>{u}</loc></url>' for u in urls)}</urlset>".encode()
        )

    with SampleSite(pages=4) as site:
        posts = site.serve("/posts.xml", urlset([site.page_url(i) for i in range(4)]))
        tags = site.serve("/tags.xml", urlset([f"{site.url}/tag/{t}" for t in "ab"]))
        index = site.serve(
            "/idx.xml",
            f"<sitemapindex {NS}><sitemap><loc>{posts}</loc></sitemap>"
            f"<sitemap><loc>{tags}</loc></sitemap></sitemapindex>".encode(),
        )
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, INCRECRAWL_DENY=[r"/tag/"])
        first = await run_crawl(settings, sitemap_url=index)
        site.serve("/tags.xml", urlset([f"{site.url}/tag/{t}" for t in "abc"]))
        clock.advance(3600)
        second = await run_crawl(settings, sitemap_url=index)
    assert (first.reason, second.reason) == ("finished", "finished")
    assert "increcrawl/discovery_incomplete" not in second.stats


@pytest_twisted.ensureDeferred
async def test_a_robots_seed_read_before_its_www_redirect_reads_its_sitemap_again(
    tmp_path: Path, clock: Clock
) -> None:
    """The sitemap was read whole (every URL refused: the site's redirect to www. not
    yet in place, or an older version that did not follow it) and its validators kept;
    once robots.txt redirects to www., the sitemap is read again, not answered 304."""
    port = free_port()
    site = tmp_path / "site"
    write_site(site, port, ["a", "b"])
    (site / "robots.txt").write_text(f"Sitemap: http://www.localhost:{port}/sitemap.xml\n")
    db = str(tmp_path / "s.sqlite")
    seed = {"robots_url": f"http://localhost:{port}/robots.txt"}
    with nginx(site, tmp_path / "nginx1", port=port):
        first = await run_crawl(crawl_settings(db, clock), **seed)
    assert first.items == []  # the pages' host is not the seed's: nothing said so yet
    with nginx(site, tmp_path / "nginx2", port=port, extra=TO_WWW):
        clock.advance(86_400)
        second = await run_crawl(crawl_settings(db, clock), **seed)
    assert second.changes("new") == {f"http://www.localhost:{port}/{n}.html" for n in "ab"}
