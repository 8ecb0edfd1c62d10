"""Hybrid fetching's per-host verdicts and what counts as a wall (the crawls through
nginx are in test_hybrid.py)."""

from __future__ import annotations

import pytest_twisted
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy.content.blocked import is_challenge, is_shell
from increcrawl_scrapy.spiders.host_fetchers import EXTRACT, PROBE, UNKNOWN, HostFetchers
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock

DAY = 86400.0


def run(coroutine):
    """A coroutine of ours (it awaits asyncio futures) as a Deferred for the test."""
    return deferred_from_coro(coroutine)


def test_a_shell_is_scripts_without_text() -> None:
    assert is_shell(b'<html><head><script src="/a.js"></script></head><body><div id="app">')
    assert is_shell(
        b"<html><body><noscript>Enable JavaScript to run this app.</noscript>"
        b"<script>boot()</script></body></html>"
    )
    page = b"<html><body><p>A page of its own, with words enough to read.</p><script>x()</script>"
    assert not is_shell(page)
    assert not is_shell(b"<html><body><p>Short.</p></body></html>")  # no script: a page


def test_a_challenge_is_a_page_whose_own_text_is_the_wall() -> None:
    assert is_challenge(b"<html><head><title>Just a moment...</title></head></html>", "")
    form = b'<div id="cf-chl-widget"></div><script src="/cdn-cgi/challenge-platform/h/b/"></script>'
    assert is_challenge(form, "")
    assert is_challenge(b"<p>Verify you are human</p>", "Verify you are human by completing this.")
    assert not is_challenge(
        b"<html><body><p>How a captcha works.</p></body></html>", "How a captcha works."
    )
    assert not is_challenge(b"<title>Just a moment</title>" + b"x" * 70_000, "x")
    # JavaScript Detections: the challenge platform's script on a normal page.
    script = b"<script>a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js'</script>"
    assert not is_challenge(b"<html><body><p>An article.</p>" + script, "An article. " * 20)
    assert not is_challenge(b"<html><body><p>Short.</p>" + script, "Short.")
    # A long page is a page, even titled like a wall (a post about them).
    long = "Why sites say just a moment. " * 40
    assert not is_challenge(b"<title>Just a moment: on walls</title>", long)


@pytest_twisted.ensureDeferred
async def test_verdicts_back_off_are_kept_and_come_back(tmp_path) -> None:
    clock = Clock(1_000_000.0)
    with StateStore(str(tmp_path / "s.sqlite")) as store:
        hosts = HostFetchers(7 * DAY, clock, store.remembered, store.remember)
        fetcher = await run(hosts.load("example.com"))
        assert fetcher.mode == UNKNOWN and hosts.judging("example.com")
        await run(hosts.direct_fails("example.com", "blocked"))
        assert fetcher.mode == EXTRACT and fetcher.retry_at == clock.now + 7 * DAY
        assert not hosts.probes("example.com")

        # The next run, before the retry: not probed; after it: one scout again.
        again = HostFetchers(7 * DAY, clock, store.remembered, store.remember)
        assert (await run(again.load("example.com"))).mode == EXTRACT
        assert not again.judging("example.com") and not again.probes("example.com")
        clock.advance(7 * DAY)
        assert again.judging("example.com") and again.probes("example.com")
        await run(again.direct_fails("example.com", "blocked"))  # still blocked: twice the wait
        assert again.hosts["example.com"].retry_at == clock.now + 14 * DAY

        later = HostFetchers(7 * DAY, clock, store.remembered, store.remember)
        await run(later.load("example.com"))
        clock.advance(14 * DAY)
        await run(later.direct_sees("example.com", agreed=True))  # let through again
        kept = HostFetchers(7 * DAY, clock, store.remembered, store.remember)
        restored = await run(kept.load("example.com"))
        assert restored.mode == PROBE and restored.wait == 0 and restored.agreed == 1
        assert kept.probes("example.com")

        for _ in range(10):  # the wait stops doubling at 16 times the setting
            clock.advance(200 * DAY)
            kept.settled.clear()
            await run(kept.direct_fails("example.com", "differs"))
        assert kept.hosts["example.com"].wait == 16 * 7 * DAY
        store.remember("fetcher:broken.example", "{not json")
        assert (await run(kept.load("broken.example"))).mode == UNKNOWN
