"""An add-on crawl ends when its work does. Its check of the pages the last runs did
not reach (``pages/unreached.py``) starts when the crawl is first idle and keeps it
open; when it found nothing, the crawl waited for Scrapy's engine heartbeat (5 s) to
look again: every add-on run ended 5 s after its last page. Here the heartbeat is an
hour: the crawl must end by itself."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.core.engine import ExecutionEngine
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread

from tests.conftest import Clock
from tests.crawling import PagesSpider
from tests.servers import nginx, nginx_binary

pytestmark = pytest.mark.skipif(
    nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
)


@pytest_twisted.ensureDeferred
async def test_an_add_on_crawl_ends_without_waiting_for_the_engines_heartbeat(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ExecutionEngine, "_SLOT_HEARTBEAT_INTERVAL", 3600.0)
    root = tmp_path / "www"
    root.mkdir()
    for i in range(3):
        (root / f"p{i}.html").write_text(f"<html><body><h1>Page {i}</h1></body></html>")
    with nginx(root, tmp_path / "nginx") as (url, _access):
        settings = _add_on(tmp_path, clock)
        for run in range(2):  # the first run (no state) and a later one
            crawler = Crawler(PagesSpider, Settings(settings))
            crawl = Deferred.fromCoroutine(_crawl(crawler, [f"{url}/p{i}.html" for i in range(3)]))
            # Before the fix: still open after a minute (cancelled, no finish_reason).
            await crawl.addTimeout(60, reactor, onTimeoutCancel=_stopped(crawler))
            assert crawler.stats is not None
            assert crawler.stats.get_value("finish_reason") == "finished", run
            clock.advance(40 * 86400.0)


def _add_on(tmp_path: Path, clock: Clock) -> dict[str, Any]:
    return {
        "ADDONS": {"increcrawl_scrapy.Addon": 300},
        "INCRECRAWL_DB": str(tmp_path / "s.sqlite"),
        "INCRECRAWL_CLOCK": clock,
        "TELNETCONSOLE_ENABLED": False,
    }


async def _crawl(crawler: Crawler, urls: list[str]) -> None:
    await crawler.crawl(urls=urls)


def _stopped(crawler: Crawler) -> Any:
    """On the timeout, the crawl stopped too (not left open for the hour)."""

    def stop(result: Any, timeout: float) -> Any:
        if hasattr(crawler, "stop_async"):  # Scrapy 2.14 and later
            Deferred.fromCoroutine(crawler.stop_async())
        else:
            crawler.stop()
        return result

    return stop


@pytest_twisted.ensureDeferred
async def test_the_crawl_stays_open_while_the_check_reads_the_state(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine looks again while the check's query runs (a held item's release, a
    last response): the crawl is still idle then, but must not close the state under
    the query ("Cannot operate on a closed database", seen once in CI)."""
    from increcrawl_scrapy import compat
    from increcrawl_scrapy.state.readings import StoreReadings

    crawlers: list[Crawler] = []
    unreached = StoreReadings.unreached
    errors: list[Exception] = []

    closed, read = threading.Event(), threading.Event()

    def woken_meanwhile(self: Any, *args: Any) -> list[str]:  # on the state's thread
        reactor.callFromThread(compat.wake_engine, crawlers[-1])
        closed.wait(2)  # the crawl closing meanwhile (it must not: then 2 s)
        try:
            return unreached(self, *args)
        except Exception as exc:  # the state closed under it
            errors.append(exc)
            raise
        finally:
            read.set()

    monkeypatch.setattr(StoreReadings, "unreached", woken_meanwhile)
    root = tmp_path / "www"
    root.mkdir()
    (root / "p0.html").write_text("<html><body><h1>Page 0</h1></body></html>")
    with nginx(root, tmp_path / "nginx") as (url, _access):
        settings = _add_on(tmp_path, clock)
        crawler = Crawler(PagesSpider, Settings(settings))
        crawlers.append(crawler)
        crawler.signals.connect(
            lambda: reactor.callLater(0.5, closed.set), signal=signals.spider_closed, weak=False
        )
        await crawler.crawl(urls=[f"{url}/p0.html"])
        assert await deferToThread(read.wait, 10)  # the check's query, whenever it ended
        assert crawler.stats is not None
        assert crawler.stats.get_value("finish_reason") == "finished"
        assert errors == []
