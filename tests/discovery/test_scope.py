"""Scope is judged on the URL exactly as Scrapy will request it: a corpus of URL
tricks, read alone and through whole crawls against a second loopback host that
counts every request it gets."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import pytest_twisted
from hypothesis import given
from hypothesis import strategies as st
from scrapy import Request
from w3lib.url import safe_url_string

from increcrawl_scrapy.scope import Scope, UrlRefused, request_target, requested_url
from increcrawl_scrapy.testing import SampleSite
from tests.canary import Canary
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def tricks(seed: str, evil: str) -> list[str]:
    """Spellings meant to reach *evil* (``127.0.0.2:PORT``) from a sitemap of *seed*
    (``127.0.0.1:PORT``)."""
    evil_host, evil_port = evil.split(":")
    return [
        f"http://{evil}\\@{seed}/secret",  # a regex reads userinfo, Scrapy reads a path
        f"http://{evil}\\\\@{seed}/secret",
        f"http://{seed}@{evil}/secret",  # userinfo in front of the other host
        f"http://{seed}:x@{evil}/secret",
        f"http://{evil}%2F@{seed}/secret",  # percent-encoded slash in userinfo
        f"http://{evil}%5C@{seed}/secret",
        f"http://{evil}#@{seed}/secret",
        f"http://{evil}?@{seed}/secret",
        f"http:/\\{evil}/secret",
        f"http:\\\\{evil}/secret",
        f" http://{evil}/secret",
        f"http://{seed}\t@{evil}/secret",
        f"http://2130706434:{evil_port}/secret",  # 127.0.0.2 in decimal
        f"http://0177.0.0.2:{evil_port}/secret",  # octal
        f"http://0x7f.0.0.2:{evil_port}/secret",  # hex
        f"http://0x7f000002:{evil_port}/secret",
        f"http://127.2:{evil_port}/secret",  # short form
        f"http://[::ffff:127.0.0.2]:{evil_port}/secret",
        f"http://[::ffff:7f00:2]:{evil_port}/secret",
        f"http://{evil_host}.:{evil_port}/secret",  # trailing dot
        f"http://127%2E0%2E0%2E2:{evil_port}/secret",  # percent-encoded dots
        f"http://127\u30020\u30020\u30022:{evil_port}/secret",  # ideographic full stops (IDNA)
        f"http://127\uff0e0\uff0e0\uff0e2:{evil_port}/secret",  # fullwidth dots
        f"HTTP://{evil}/secret",
        f"http://{evil}/secret",
        f"https://{evil}/secret",
        f"//{evil}/secret",
    ]


def test_tricks_never_pass_as_the_seed() -> None:
    scope = Scope("127.0.0.1")
    skipped: Counter[str] = Counter()
    for url in tricks("127.0.0.1:8000", "127.0.0.2:9000"):
        assert scope.request_url(url, skipped) is None, url
    assert set(skipped) <= {"offsite", "userinfo", "bad_host", "bad_scheme", "ambiguous"}


def test_the_checked_url_is_the_requested_url() -> None:
    scope = Scope("example.com")
    skipped: Counter[str] = Counter()
    for url in (
        "https://example.com/a",
        "HTTP://EXAMPLE.COM:80/a?b#c",  # the scheme's own port
        "https://example.com",
        "https://example.com/a@b/c",  # "@" in the path is fine
        "https://example.com/caf\u00e9 au lait",
        "https://example.com/%7Euser/a%20b",
        "https://example.com/a/../b",  # w3lib 2.6 resolves dot segments, 2.5 does not
        "https://example.com/./a/.",
        "https://example.com:443",
    ):
        requested = scope.request_url(url, skipped)
        assert requested is not None, url
        assert requested == Request(url).url
    for bad in (
        "https://example.com.evil.org/",
        "HTTP://EXAMPLE.COM:8080/a?b#c",  # another port: another service
        "https://evil.org/?example.com",
        "https://sub.example.com/",
        "ftp://example.com/",
        "javascript:alert(1)",
        "https://user@example.com/",
        "https://EXAMPLE.com\\path",  # urllib and Scrapy read two hosts
        "http://2130706433/",  # 127.0.0.1 in decimal: only dotted quads are hosts
        "https://" + "x" * 3000,
    ):
        assert scope.request_url(bad, skipped) is None, bad
    assert Scope("example.com", include_subdomains=True).request_url(
        "https://a.b.example.com/", skipped
    )


def test_redirects_stay_on_the_site() -> None:
    scope = Scope("example.com")
    assert scope.follows_redirect("https://example.com/b")
    assert scope.follows_redirect("http://www.example.com/b")
    assert Scope("www.example.com").follows_redirect("https://example.com/")
    for other in ("https://evil.org/", "https://example.com.evil.org/", "https://x@evil.org/"):
        assert not scope.follows_redirect(other)


@given(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyzAZ0123456789-._~!$&'()*+,;=:@/?#%\\ ", max_size=40)
)
def test_fast_path_agrees_with_w3lib(tail: str) -> None:
    url = f"http://example.com/{tail}"
    assert requested_url(url) == safe_url_string(url, "utf-8")


# Hosts ending in a number ("0", "a.0", "0x1f") are IPv4 to w3lib 2.6; an empty path
# is "/" to it; dot segments are resolved: the fast path must leave all to w3lib.
@given(
    labels=st.lists(st.from_regex(r"[a-z0-9_-]{0,4}|0x[0-9a-f]{0,3}", fullmatch=True), max_size=4),
    port=st.sampled_from(["", ":80", ":8080"]),
    segments=st.lists(st.sampled_from(["", ".", "..", "a", ".a", "...", "b;c", "%2e"]), max_size=4),
    slash=st.booleans(),
)
def test_fast_path_agrees_with_w3lib_on_hosts_and_dots(
    labels: list[str], port: str, segments: list[str], slash: bool
) -> None:
    path = "".join(f"/{s}" for s in segments) + ("/" if slash else "")
    url = f"https://{'.'.join(labels)}{port}{path}"
    try:
        expected = safe_url_string(url, "utf-8")
    except ValueError:  # w3lib 2.6's for a host such as "300.0"
        with pytest.raises(ValueError):
            requested_url(url)
        return
    assert requested_url(url) == expected
    try:
        requested, _host = request_target(url)
    except UrlRefused:
        return
    assert requested == Request(url).url


def test_a_host_that_idna_versions_spell_two_ways_is_refused() -> None:
    # IDNA 2003 (Python, w3lib up to 2.5) maps "ß" to "ss"; browsers and w3lib 2.6
    # keep it (xn--fa-hia.de): another domain. Refused under either.
    for url in ("https://faß.de/a", "https://ςa.gr/", "https://FAß.de/"):
        with pytest.raises(UrlRefused, match="ambiguous"):
            request_target(url)
    assert request_target("https://fass.de/a")[1] == "fass.de"
    assert request_target("https://xn--fa-hia.de/a")[1] == "xn--fa-hia.de"


def test_arguments_are_checked_the_same_way() -> None:
    assert request_target("https://B\u00fccher.de/x") == (
        "https://xn--bcher-kva.de/x",
        "xn--bcher-kva.de",
    )
    for bad in (
        "http://a.com\\@b.com/",  # b.com to urllib, a.com to Scrapy
        "http://u@b.com/",
        "ftp://b.com/",
        "http://b.com:x/",
        "http://b%2Ecom/",
        "http://0x7f.0.0.1/",
        "http://b.com./",
    ):
        with pytest.raises(UrlRefused):
            request_target(bad)


@pytest.mark.parametrize("fetcher", ["direct", "geonode"])
@pytest_twisted.ensureDeferred
async def test_a_hostile_sitemap_reaches_no_other_host(
    site: SampleSite, api, tmp_path: Path, clock: Clock, fetcher: str
) -> None:
    with Canary() as canary:
        seed = site.url.removeprefix("http://")
        evil = canary.server.url.removeprefix("http://")
        corpus = tricks(seed, evil)
        pages = "".join(f"<url><loc>{u.replace('&', '&amp;')}</loc></url>" for u in corpus)
        children = "".join(
            f"<sitemap><loc>{u.replace('&', '&amp;')}</loc></sitemap>" for u in corpus
        )
        safe = site.page_url(1)
        urlset = site.serve(
            "/hostile.xml", f"<urlset {NS}>{pages}<url><loc>{safe}</loc></url></urlset>".encode()
        )
        index = site.serve(
            "/index.xml",
            f"<sitemapindex {NS}>{children}<sitemap><loc>{urlset}</loc></sitemap>"
            "</sitemapindex>".encode(),
        )
        settings = crawl_settings(
            str(tmp_path / "s.sqlite"), clock, api if fetcher == "geonode" else None
        )
        result = await run_crawl(settings, sitemap_url=index)
        assert result.reason == "finished"
        assert canary.hits == []
        assert result.changes("new") == {safe}  # the one honest entry was crawled
        skipped = {k: v for k, v in result.stats.items() if "sitemap/skipped/" in k}
        assert sum(skipped.values()) == len(corpus)
        refused = result.stats["increcrawl/sitemap/offsite"]
        assert refused + result.stats.get("increcrawl/sitemap/repeated", 0) == len(corpus)
        assert result.stats["increcrawl/discovery_incomplete"] == 1  # refused children


def disguised(seed: str, evil: str) -> list[str]:
    """The tricks that hide the other host (a plain URL to it is not a trick)."""
    plain = {f"http://{evil}/secret", f"https://{evil}/secret", f"HTTP://{evil}/secret"}
    return [u for u in tricks(seed, evil) if u.strip() not in plain]


@pytest_twisted.ensureDeferred
async def test_robots_sitemap_lines_in_disguise_reach_no_other_host(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    with Canary() as canary:
        seed = site.url.removeprefix("http://")
        lines = disguised(seed, canary.url.removeprefix("http://"))
        robots = "User-agent: *\n" + "".join(f"Sitemap: {u}\n" for u in lines)
        site.serve("/robots.txt", f"{robots}Sitemap: {site.sitemap_url}\n".encode(), "text/plain")
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        result = await run_crawl(settings, robots_url=site.robots_url)
        assert canary.hits == []
    assert result.changes("new") == set(site.page_urls())


@pytest_twisted.ensureDeferred
async def test_map_links_in_disguise_reach_no_other_host(
    site: SampleSite, api, tmp_path: Path, clock: Clock
) -> None:
    with Canary() as canary:
        seed = site.url.removeprefix("http://")
        api.configure(map_extra_links=tricks(seed, canary.url.removeprefix("http://")))
        site.hide_sitemaps()
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, api)
        result = await run_crawl(settings, site_url=f"{site.url}/")
        assert canary.hits == []
    assert set(site.page_urls()) <= result.changes("new")
    assert all(item["url"].startswith(site.url + "/") for item in result.items)


def test_another_port_is_off_the_site() -> None:
    skipped: Counter[str] = Counter()
    scope = Scope("example.com")
    assert scope.request_url("http://example.com:80/a", skipped) == "http://example.com:80/a"
    assert scope.request_url("https://example.com:443/a", skipped) is not None
    assert scope.request_url("http://example.com:8081/admin", skipped) is None
    assert scope.request_url("https://example.com:9200/_cat", skipped) is None
    assert skipped["offsite"] == 2
    assert not scope.follows_redirect("http://example.com:8081/admin")
    assert scope.follows_redirect("https://www.example.com/a")  # scheme and www. may change
    with_port = Scope("127.0.0.1", port=8080)
    assert with_port.request_url("http://127.0.0.1:8080/a", skipped) is not None
    assert with_port.request_url("http://127.0.0.1/a", skipped) is None
    assert not with_port.follows_redirect("http://127.0.0.1:8081/")


@pytest_twisted.ensureDeferred
async def test_a_sitemap_entry_or_redirect_to_another_port_is_not_fetched(
    site: SampleSite, tmp_path: Path, clock: Clock
) -> None:
    with Canary(host="127.0.0.1") as canary:  # the seed's host, another port
        admin = f"{canary.url}/admin"
        safe, moved = site.page_url(1), site.page_url(2)
        entries = "".join(f"<url><loc>{u}</loc></url>" for u in (admin, safe, moved))
        urlset = site.serve("/ports.xml", f"<urlset {NS}>{entries}</urlset>".encode())
        site.redirect(2, f"{canary.url}/console")
        settings = crawl_settings(str(tmp_path / "s.sqlite"), clock)
        result = await run_crawl(settings, sitemap_url=urlset)
        assert canary.hits == []
    assert result.changes("new") == {safe}
    assert all(item["url"].startswith(site.url + "/") for item in result.items)
