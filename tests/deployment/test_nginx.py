"""A real web server as the origin: nginx's own ETag, Last-Modified and 304."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

DAY = 86400.0
PAGES = [f"page-{i}.html" for i in range(1, 6)]
LINE = re.compile(r"^(\d{3}) (\S+) inm=\[([^\]]*)\] ims=\[([^\]]*)\]$")


def write_site(root: Path, base: str) -> None:
    for name in PAGES:
        (root / name).write_text(f"<html><body><h1>{name}</h1><p>Text of {name}.</p></body></html>")
    urls = "".join(f"<url><loc>{base}/{name}</loc></url>" for name in PAGES)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


def rewrite(root: Path, name: str) -> None:
    path = root / name
    path.write_text(path.read_text().replace("Text of", "New text of"))
    stamp = path.stat().st_mtime + 60  # a later edit: new Last-Modified and ETag
    os.utime(path, (stamp, stamp))


def page_lines(access: Path) -> list[tuple[int, str, str, str]]:
    found = []
    for line in access.read_text().splitlines():
        match = LINE.match(line)
        if match and match.group(2).startswith("/page-"):
            found.append((int(match.group(1)), match.group(2), match.group(3), match.group(4)))
    return found


@pytest.fixture
def origin(tmp_path: Path):
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, access):
        write_site(root, url)
        yield root, url, access


@pytest_twisted.ensureDeferred
async def test_direct_mode_uses_nginx_validators(origin, tmp_path: Path, clock: Clock) -> None:
    root, url, access = origin
    db = str(tmp_path / "s.sqlite")
    settings = crawl_settings(db, clock)
    first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert len(first.changes("new")) == 5
    with StateStore(db) as store:
        stored = {name: store.get(f"{url}/{name}") for name in PAGES}
    assert all(page.etag and page.last_modified for page in stored.values())

    clock.advance(DAY + 1)
    offset = len(page_lines(access))
    second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert second.stats["increcrawl/unchanged"] == 5 and second.items == []
    lines = page_lines(access)[offset:]
    assert len(lines) == 5
    for status, path, inm, ims in lines:
        page = stored[path.lstrip("/")]
        assert status == 304
        assert (inm, ims) == (page.etag, page.last_modified)  # nginx's own validators

    rewrite(root, "page-3.html")
    clock.advance(1.5 * DAY + 1)
    third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
    assert {(i["url"], i["change"]) for i in third.items} == {(f"{url}/page-3.html", "changed")}
    assert third.stats["increcrawl/unchanged"] == 4


@pytest_twisted.ensureDeferred
async def test_geonode_mode_forwards_validators_to_nginx(
    origin, tmp_path: Path, clock: Clock
) -> None:
    root, url, access = origin
    db = str(tmp_path / "s.sqlite")
    with GeonodeStandIn(api_keys=[KEY]) as api:
        geonode = crawl_settings(db, clock, api)
        # Validators come from a direct fetch (the API does not return them)...
        await run_crawl(crawl_settings(db, clock), sitemap_url=f"{url}/sitemap.xml")
        clock.advance(DAY + 1)
        offset = len(page_lines(access))
        second = await run_crawl(geonode, sitemap_url=f"{url}/sitemap.xml")
        # ...and travel through the API's `headers` to nginx, which answers 304.
        assert second.stats["increcrawl/unchanged"] == 5
        assert api.counters()["conditional_requests"] == 5
        assert [line[0] for line in page_lines(access)[offset:]] == [304] * 5

        rewrite(root, "page-3.html")
        clock.advance(1.5 * DAY + 1)
        third = await run_crawl(geonode, sitemap_url=f"{url}/sitemap.xml")
        assert {(i["url"], i["change"]) for i in third.items} == {(f"{url}/page-3.html", "changed")}
        assert {i["fetcher"] for i in third.items} == {"geonode"}
        assert api.counters()["requests"]["POST /v1/extract"] == 10


@pytest_twisted.ensureDeferred
async def test_geonode_mode_alone_detects_the_edit_by_content(
    origin, tmp_path: Path, clock: Clock
) -> None:
    root, url, access = origin
    db = str(tmp_path / "s.sqlite")
    with GeonodeStandIn(api_keys=[KEY]) as api:
        settings = crawl_settings(db, clock, api)
        assert (
            len((await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")).changes("new")) == 5
        )
        clock.advance(DAY + 1)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert second.stats["increcrawl/unchanged"] == 5
        rewrite(root, "page-3.html")
        clock.advance(1.5 * DAY + 1)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert {(i["url"], i["change"]) for i in third.items} == {(f"{url}/page-3.html", "changed")}
        assert all(status == 200 for status, *_ in page_lines(access))
