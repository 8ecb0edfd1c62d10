from __future__ import annotations

import gzip
import re
from datetime import datetime, timezone
from email.utils import format_datetime

import requests

from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.content.markdown import html_to_markdown
from increcrawl_scrapy.testing import SampleSite


def locs(xml: bytes) -> list[str]:
    return re.findall(r"<loc>([^<]+)</loc>", xml.decode())


def sitemap_urls(site: SampleSite) -> list[str]:
    urls = []
    for child in locs(requests.get(site.sitemap_url, timeout=5).content):
        body = requests.get(child, timeout=5).content
        urls += locs(gzip.decompress(body) if child.endswith(".gz") else body)
    return urls


def test_robots_points_to_a_sitemap_index_with_plain_and_gzipped_children(site: SampleSite) -> None:
    robots = requests.get(site.robots_url, timeout=5).text
    assert f"Sitemap: {site.sitemap_url}" in robots
    children = locs(requests.get(site.sitemap_url, timeout=5).content)
    assert [c.rsplit("/", 1)[1] for c in children] == ["sitemap-1.xml", "sitemap-2.xml.gz"]
    gz = requests.get(children[1], timeout=5)
    assert gz.content[:2] == b"\x1f\x8b"
    assert b"<urlset" in gzip.decompress(gz.content)


def test_sitemap_lists_every_page_some_with_lastmod_and_spelling_variants(site: SampleSite) -> None:
    urls = sitemap_urls(site)
    for i in range(site.pages):
        assert site.page_url(i) in urls
    variants = [u for u in urls if u not in site.page_urls()]
    assert len(variants) == 2 and any("utm_source" in v for v in variants)
    plain = requests.get(f"{site.url}/sitemap-1.xml", timeout=5).text
    assert "<lastmod>" in plain and plain.count("<lastmod>") < plain.count("<url>")


def test_etag_page_answers_304_to_a_matching_if_none_match(site: SampleSite) -> None:
    first = requests.get(site.page_url(0), timeout=5)
    etag = first.headers["ETag"]
    assert etag.startswith('"') and "Last-Modified" not in first.headers
    again = requests.get(site.page_url(0), headers={"If-None-Match": etag}, timeout=5)
    assert again.status_code == 304 and again.headers["ETag"] == etag
    stale = requests.get(site.page_url(0), headers={"If-None-Match": '"nope"'}, timeout=5)
    assert stale.status_code == 200
    assert site.conditional["/page/0"] == 2


def test_last_modified_page_answers_304_when_not_modified_since(site: SampleSite) -> None:
    first = requests.get(site.page_url(1), timeout=5)
    stamp = first.headers["Last-Modified"]
    assert "ETag" not in first.headers
    assert (
        requests.get(site.page_url(1), headers={"If-Modified-Since": stamp}, timeout=5).status_code
        == 304
    )
    older = format_datetime(datetime(2000, 1, 1, tzinfo=timezone.utc), usegmt=True)
    assert (
        requests.get(site.page_url(1), headers={"If-Modified-Since": older}, timeout=5).status_code
        == 200
    )


def test_plain_pages_have_no_validators(site: SampleSite) -> None:
    answer = requests.get(site.page_url(2), timeout=5)
    assert answer.status_code == 200
    assert "ETag" not in answer.headers and "Last-Modified" not in answer.headers


def test_volatile_page_differs_every_time_but_not_its_fingerprint(site: SampleSite) -> None:
    one = requests.get(site.page_url(3), timeout=5).text
    two = requests.get(site.page_url(3), timeout=5).text
    assert one != two
    assert "Related posts" in one and "csrf_token=" in one
    assert content_fingerprint(html_to_markdown(one)) == content_fingerprint(html_to_markdown(two))


def test_edit_changes_content_fingerprint_validators_and_lastmod(site: SampleSite) -> None:
    before = requests.get(site.page_url(4), timeout=5)
    lastmod = site.lastmod(4)
    site.edit(4)
    after = requests.get(site.page_url(4), timeout=5)
    assert after.headers["ETag"] != before.headers["ETag"]
    assert content_fingerprint(html_to_markdown(after.text)) != content_fingerprint(
        html_to_markdown(before.text)
    )
    assert site.lastmod(4) != lastmod
    site.edit(5, text="Completely new words.")
    assert "Completely new words." in requests.get(site.page_url(5), timeout=5).text


def test_add_delete_and_drop_from_sitemap(site: SampleSite) -> None:
    [added] = site.add()
    assert added == 12 and site.page_url(added) in sitemap_urls(site)
    assert requests.get(site.page_url(added), timeout=5).status_code == 200
    site.delete(6)
    site.delete(7, status=410)
    assert requests.get(site.page_url(6), timeout=5).status_code == 404
    assert requests.get(site.page_url(7), timeout=5).status_code == 410
    site.drop_from_sitemap(8)
    urls = sitemap_urls(site)
    assert site.page_url(6) not in urls and site.page_url(8) not in urls
    assert requests.get(site.page_url(8), timeout=5).status_code == 200
    site.restore_to_sitemap(8)
    assert site.page_url(8) in sitemap_urls(site)


def test_lastmod_modes(site: SampleSite) -> None:
    before = site.lastmod(1)
    site.bump_lastmod(1)
    assert site.lastmod(1) != before
    frozen = SampleSite(pages=4, lastmod_mode="frozen")
    frozen.edit(1)
    assert frozen.lastmod(1) == frozen.lastmod(2)
    deploy = SampleSite(pages=4, lastmod_mode="deploy")
    stamp = deploy.lastmod(1)
    deploy.deploy()
    assert deploy.lastmod(1) == deploy.lastmod(2) != stamp


def test_failing_page(site: SampleSite) -> None:
    site.fail(9, 503)
    assert requests.get(site.page_url(9), timeout=5).status_code == 503
    site.fail(9, None)
    assert requests.get(site.page_url(9), timeout=5).status_code == 200


def test_large_site_splits_sitemaps_at_the_protocol_limit() -> None:
    with SampleSite(pages=120_000) as site:
        children = locs(requests.get(site.sitemap_url, timeout=5).content)
        assert len(children) == 3
        body = requests.get(children[1], timeout=30).content
        assert len(locs(gzip.decompress(body))) == 50_000
        assert requests.get(site.page_url(119_999), timeout=5).status_code == 200
