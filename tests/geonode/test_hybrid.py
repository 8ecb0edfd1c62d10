"""Hybrid fetching (INCRECRAWL_FETCHER = "hybrid") through whole crawls: nginx as the
origin, the stand-in Geonode API as the paid fetcher. nginx tells the two apart by
User-Agent (the stand-in fetches with Python's urllib), so a host can block direct
requests, serve them a JavaScript shell, or answer them something else."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from increcrawl_scrapy import stats
from increcrawl_scrapy.spiders.incremental import IncrementalSpider
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
PAGES = [f"page-{i}.html" for i in range(1, 7)]
GEONODE_UA = '"Python-urllib"'
#: Per page: a flag file in the root turns blocking on (403, or 429), and the
#: User-Agent tells a direct request (Scrapy's) from the stand-in's.
BLOCKING = (
    "location ~ ^/page- {"
    ' set $block "";'
    ' if (-f $document_root/.blocked) { set $block "403"; }'
    ' if (-f $document_root/.blocked429) { set $block "429"; }'
    f' if ($http_user_agent !~* {GEONODE_UA}) {{ set $block "${{block}}-direct"; }}'
    ' if ($block = "403-direct") { return 403; }'
    ' if ($block = "429-direct") { return 429; }'
    " }"
)
#: Direct requests get a JavaScript shell (or another page), the stand-in the page.
OTHER_FOR_DIRECT = (
    "location ~ ^/page- {"
    f" if ($http_user_agent !~* {GEONODE_UA}) {{ rewrite ^/(.*)$ /direct/$1 break; }}"
    " }"
)
SHELL = (
    '<html><head><title>App</title><script src="/app.js"></script></head>'
    '<body><div id="root"></div><noscript>Enable JavaScript.</noscript></body></html>'
)


def page_html(name: str, words: str = "Text of") -> str:
    return (
        f"<html><head><title>{name}</title></head><body><main><h1>{name}</h1>"
        f"<p>{words} {name}, long enough to be a page of its own.</p></main></body></html>"
    )


def write_site(root: Path, base: str) -> None:
    for name in PAGES:
        (root / name).write_text(page_html(name))
    urls = "".join(f"<url><loc>{base}/{name}</loc></url>" for name in PAGES)
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


def serve_direct(root: Path, base: str, html_of: Callable[[str], str]) -> None:
    """The site, with what direct requests get instead of each page (nginx serves
    ``direct/`` to Scrapy's User-Agent, the site itself to the stand-in's)."""
    write_site(root, base)
    (root / "direct").mkdir()
    for name in PAGES:
        (root / "direct" / name).write_text(html_of(name))


def settings_for(db: str, clock: Clock, api: GeonodeStandIn, **extra: object) -> dict:
    return crawl_settings(
        db,
        clock,
        api,
        INCRECRAWL_FETCHER="hybrid",
        INCRECRAWL_POLICY="adaptive",  # every page due again after 3 days
        INCRECRAWL_MAX_INTERVAL=2 * DAY,
        **extra,
    )


def tokens(result) -> int:
    return int(result.stats.get(stats.API_TOKENS, 0))


def probes(result) -> int:
    return int(result.stats.get(stats.HYBRID_PROBES, 0))


def changed(result) -> set[str]:
    return result.changes("changed") | result.changes("new") | result.changes("gone")


@pytest.fixture
def api():
    with GeonodeStandIn(api_keys=[KEY]) as running:
        yield running


def origin(tmp_path: Path, extra: str):
    root = tmp_path / "www"
    root.mkdir(exist_ok=True)
    return root, nginx(root, tmp_path / "nginx", extra=extra)


@pytest_twisted.ensureDeferred
async def test_answering_304s_spends_tokens_only_on_changes(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, "")
    with server as (url, _access):
        write_site(root, url)
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        # New pages: a probe each, then the paid extraction the items come from.
        assert probes(first) == len(PAGES) and tokens(first) == len(PAGES)
        assert {item["fetcher"] for item in first.items} == {"hybrid"}
        assert first.stats[stats.HYBRID_AGREED] >= 1
        assert tokens(first) == api.counters()["tokens_charged"]

        clock.advance(3 * DAY)
        before = api.counters()["tokens_charged"]
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert second.stats[stats.UNCHANGED] == len(PAGES) and changed(second) == set()
        assert probes(second) == len(PAGES)
        # nginx answered the kept validators with 304s: nothing paid.
        assert tokens(second) == 0 and api.counters()["tokens_charged"] == before
        assert second.stats[stats.HYBRID_SAVED] == len(PAGES)
        summary = "\n".join(second.log)
        assert "0 tokens charged" in summary
        assert "6 direct probes (free), 6 of them answered the check without a token" in summary

        (root / PAGES[0]).write_text(page_html(PAGES[0], "New text of"))
        clock.advance(3 * DAY)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert third.changes("changed") == {f"{url}/{PAGES[0]}"}
        assert changed(third) == {f"{url}/{PAGES[0]}"}
        assert tokens(third) == 1 == api.counters()["tokens_charged"] - before
        assert third.stats["increcrawl/hybrid/extractions/changed"] == 1


@pytest.mark.parametrize("flag", [".blocked", ".blocked429"])
@pytest_twisted.ensureDeferred
async def test_a_host_blocking_direct_requests_is_extracted_then_probed_again(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn, flag: str
) -> None:
    root, server = origin(tmp_path, BLOCKING)
    with server as (url, _access):
        write_site(root, url)
        (root / flag).write_text("")
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api, RETRY_TIMES=0)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        assert all("Text of" in item["markdown"] for item in first.items)
        # One probe found the host blocked; the other pages went straight to Geonode.
        assert probes(first) == 1 and tokens(first) == len(PAGES)
        assert first.stats["increcrawl/hybrid/extractions/blocked"] == 1
        assert first.stats["increcrawl/hybrid/extractions/host"] == len(PAGES) - 1

        clock.advance(3 * DAY)  # before INCRECRAWL_HYBRID_RETRY: no probe at all
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(second) == 0 and tokens(second) == len(PAGES)
        assert second.stats[stats.UNCHANGED] == len(PAGES) and changed(second) == set()

        (root / flag).unlink()  # the host lets direct requests through again
        clock.advance(8 * DAY)  # past the retry: a probe is tried again
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(third) == len(PAGES)
        # The probes see what Geonode saw: unchanged, nothing paid, no change reported.
        assert tokens(third) == 0 and changed(third) == set()
        assert third.stats[stats.UNCHANGED] == len(PAGES)
        assert third.stats[stats.HYBRID_AGREED] >= 1

        clock.advance(3 * DAY)
        fourth = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(fourth) == len(PAGES) and tokens(fourth) == 0 and changed(fourth) == set()


@pytest_twisted.ensureDeferred
async def test_a_javascript_shell_is_extracted_with_rendering(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, OTHER_FOR_DIRECT)
    with server as (url, _access):
        serve_direct(root, url, lambda _name: SHELL)
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        assert all(
            f"Text of {item['url'].rsplit('/', 1)[1]}" in item["markdown"] for item in first.items
        )
        assert probes(first) == 1 and tokens(first) == len(PAGES)
        assert first.stats["increcrawl/hybrid/extractions/shell"] == 1
        assert api.counters()["tokens_charged"] == len(PAGES)

        clock.advance(3 * DAY)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(second) == 0 and changed(second) == set()


@pytest_twisted.ensureDeferred
async def test_a_host_whose_direct_answers_differ_stops_being_probed(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, OTHER_FOR_DIRECT)
    with server as (url, _access):
        # A real page, but not the one Geonode gets.
        serve_direct(root, url, lambda name: page_html(name, "Direct visitors read"))
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        assert all("Text of" in item["markdown"] for item in first.items)
        assert first.stats[stats.HYBRID_DIFFERED] == 1 and probes(first) == 1

        clock.advance(3 * DAY)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(second) == 0 and tokens(second) == len(PAGES)
        assert changed(second) == set()

        clock.advance(8 * DAY)  # the retry: one probe, compared again, still different
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert probes(third) == 1 and third.stats[stats.HYBRID_DIFFERED] == 1
        assert changed(third) == set() and tokens(third) == len(PAGES)


@pytest_twisted.ensureDeferred
async def test_validators_are_kept_only_with_the_fingerprint_of_their_answer(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    # Geonode's answer lags the origin: the probe sees an edit (new ETag) that the
    # extraction after it does not. Kept with the old fingerprint, that ETag would
    # make every later probe a 304, and the edit would never be reported.
    root, server = origin(tmp_path, OTHER_FOR_DIRECT)
    lagging = PAGES[-1]
    with server as (url, _access):
        serve_direct(root, url, page_html)
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}

        (root / "direct" / lagging).write_text(page_html(lagging, "Edited text of"))
        clock.advance(3 * DAY)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert changed(second) == set()  # Geonode still serves the old text
        assert second.stats[stats.HYBRID_DIFFERED] == 1

        (root / lagging).write_text(page_html(lagging, "Edited text of"))  # caught up
        reported: set[str] = set()
        for _ in range(2):  # after the host's retry: probed again
            clock.advance(8 * DAY)
            later = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
            reported |= changed(later)
        assert reported == {f"{url}/{lagging}"}


CHALLENGE = (
    "<html><head><title>Just a moment...</title></head><body>"
    '<div id="cf-chl-widget">Checking your browser before accessing the site.</div>'
    "</body></html>"
)


@pytest_twisted.ensureDeferred
async def test_a_challenge_page_answered_200_is_extracted(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, OTHER_FOR_DIRECT)
    with server as (url, _access):
        serve_direct(root, url, lambda _name: CHALLENGE)
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        assert not any("Checking your browser" in item["markdown"] for item in first.items)
        assert probes(first) == 1 and tokens(first) == len(PAGES)
        assert first.stats["increcrawl/hybrid/extractions/challenge"] == 1
        assert any("answered direct requests with a challenge page" in x for x in first.log)


#: What Cloudflare's JavaScript Detections inject into every page they serve: the
#: page is the page, the snippet only a script (no challenge shown).
JS_DETECTIONS = (
    "<script>(function(){function c(){var b=a.contentDocument||a.contentWindow.document;"
    "if(b){var d=b.createElement('script');d.innerHTML=\"window.__CF$cv$params={r:'8f1e2d3c',"
    "t:'MTczMDAwMDAwMC4w'};var a=document.createElement('script');a.nonce='';"
    "a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';"
    "document.getElementsByTagName('head')[0].appendChild(a);\";"
    "b.getElementsByTagName('head')[0].appendChild(d)}}if(document.body){var a="
    "document.createElement('iframe');a.height=1;a.width=1;a.style.visibility='hidden';"
    "document.body.appendChild(a);c()}})();</script>"
)


@pytest_twisted.ensureDeferred
async def test_a_page_carrying_a_challenge_script_is_no_challenge(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    # Every page of the site carries the snippet, for direct requests and Geonode
    # alike: its main content is the page's, so an unchanged page costs nothing.
    root, server = origin(tmp_path, "")
    with server as (url, _access):
        write_site(root, url)
        for name in PAGES:
            page = root / name
            page.write_text(page.read_text().replace("</body>", JS_DETECTIONS + "</body>"))
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES}
        assert "increcrawl/hybrid/extractions/challenge" not in first.stats

        clock.advance(3 * DAY)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert changed(second) == set() and tokens(second) == 0
        assert second.stats[stats.HYBRID_SAVED] == len(PAGES)


@pytest_twisted.ensureDeferred
async def test_the_token_budget_counts_free_probes_as_free(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, "")
    with server as (url, _access):
        write_site(root, url)
        db = str(tmp_path / "s.sqlite")
        first = await run_crawl(settings_for(db, clock, api), sitemap_url=f"{url}/sitemap.xml")
        assert tokens(first) == len(PAGES)

        settings = settings_for(db, clock, api, INCRECRAWL_MAX_TOKENS=2)
        clock.advance(3 * DAY)
        second = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        # Every page checked: unchanged pages cost nothing, the budget is untouched.
        assert second.stats[stats.UNCHANGED] == len(PAGES) and tokens(second) == 0
        assert stats.TOKENS_LEFT not in second.stats

        for name in PAGES[:4]:
            (root / name).write_text(page_html(name, "Edited text of"))
        clock.advance(3 * DAY)
        third = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert tokens(third) <= 2 and len(third.changes("changed")) == tokens(third)
        assert third.stats.get(stats.TOKENS_LEFT, 0) >= 1  # the rest stay due


@pytest_twisted.ensureDeferred
async def test_a_first_probe_that_says_nothing_lets_the_next_page_judge(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    # The host's first page fails (500) and its second is robots.txt's: neither gives
    # a verdict, and no page waits for one (the crawl would hang).
    root, server = origin(tmp_path, "location = /page-1.html { return 500; }")
    with server as (url, _access):
        write_site(root, url)
        (root / "robots.txt").write_text("User-agent: *\nDisallow: /page-2.html\n")
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api, CLOSESPIDER_TIMEOUT=60)
        first = await run_crawl(settings, sitemap_url=f"{url}/sitemap.xml")
        assert first.reason == "finished"
        assert first.changes("new") == {f"{url}/{name}" for name in PAGES[2:]}
        assert first.stats["increcrawl/skipped/robots"] == 1
        assert first.stats[stats.ERRORS] == 1 and tokens(first) == len(PAGES) - 2


class TitleSpider(IncrementalSpider):
    """The incremental spider with a callback of its own for the first page."""

    name = "titles"
    page_rules = ((r"/page-1\.html$", "parse_title"),)

    def parse_title(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}


@pytest_twisted.ensureDeferred
async def test_pages_of_a_subclass_callback_are_extracted_not_probed(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    root, server = origin(tmp_path, "")
    with server as (url, _access):
        write_site(root, url)
        settings = settings_for(str(tmp_path / "s.sqlite"), clock, api, CLOSESPIDER_TIMEOUT=60)
        first = await run_crawl(
            settings, spider_class=TitleSpider, sitemap_url=f"{url}/sitemap.xml"
        )
        assert first.reason == "finished"
        titled = [item for item in first.items if item.get("title")]
        assert [item["title"] for item in titled] == [PAGES[0]] and titled[0]["change"] == "new"
        assert first.stats["increcrawl/hybrid/extractions/rule"] == 1
        assert probes(first) == len(PAGES) - 1 and tokens(first) == len(PAGES)


@pytest_twisted.ensureDeferred
async def test_pages_without_main_content_are_counted_once_each(
    tmp_path: Path, clock: Clock, api: GeonodeStandIn
) -> None:
    # A page's text is taken twice in hybrid mode (the probe, then the extraction):
    # the rule that fired on it counts once, with its result (from a review: the
    # warning said 12 of 6 pages).
    root, server = origin(tmp_path, "")
    with server as (url, _access):
        write_site(root, url)
        for name in PAGES:  # no <main>, no <article>: the whole body is the text
            (root / name).write_text(
                f"<html><head><title>{name}</title></head><body><div><h1>{name}</h1>"
                f"<p>Short text of {name}.</p></div></body></html>"
            )
        first = await run_crawl(
            settings_for(str(tmp_path / "s.sqlite"), clock, api), sitemap_url=f"{url}/sitemap.xml"
        )
    assert len(first.changes("new")) == len(PAGES)
    said = f"{len(PAGES)} of {len(PAGES)} pages checked (100%) mark no main content"
    assert any(said in line for line in first.log)
