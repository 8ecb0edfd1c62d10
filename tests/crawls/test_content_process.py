"""A page's text taken in the content process (the default): the same text and
fingerprint as on a thread, the reactor never waiting on it, and a process that dies
costing only the pages it held (site failures that back off), never the crawl."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from scrapy import signals
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import stats
from increcrawl_scrapy.content.page_text import PageTooLarge
from increcrawl_scrapy.crawl import content_process
from increcrawl_scrapy.crawl.content_process import ContentWorkerLost, in_content_process
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl


def chatty(value: str) -> str:
    """Prints on the child's stdout, which is not the answers' channel."""
    print("a library that prints", value)
    sys.stdout.flush()
    return value.upper()


def refuse(size: int) -> None:
    raise PageTooLarge(f"too large: {size} bytes")


def whoami() -> int:
    return os.getpid()


async def ask(function: Any, *args: Any) -> Any:
    """In an asyncio task, as a crawl's callbacks are."""
    return await deferred_from_coro(in_content_process(function, *args))


@pytest_twisted.ensureDeferred
async def test_answers_come_back_in_order_asked_and_errors_as_raised() -> None:
    assert await ask(chatty, "x") == "X"
    with pytest.raises(PageTooLarge, match="too large: 12 bytes"):
        await ask(refuse, 12)
    assert await ask(whoami) != os.getpid()


@pytest_twisted.ensureDeferred
async def test_ctrl_c_leaves_it_answering_for_the_graceful_stop() -> None:
    """Ctrl-C signals the terminal's whole group: the crawl stops gracefully and its
    pages in flight still need their texts."""
    pid = await ask(whoami)
    os.kill(pid, signal.SIGINT)
    assert await ask(chatty, "still") == "STILL"
    assert await ask(whoami) == pid


@pytest_twisted.ensureDeferred
async def test_a_process_that_dies_fails_its_pages_and_the_next_page_starts_another() -> None:
    before = await ask(whoami)
    with pytest.raises(ContentWorkerLost):
        await ask(os._exit, 3)
    after = await ask(whoami)
    assert after not in (before, os.getpid())


@pytest_twisted.ensureDeferred
async def test_a_process_that_cannot_start_leaves_the_work_to_the_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Say the interpreter cannot import the package in a child (a frozen app): after
    a few starts that end before answering, the thread takes the pages' texts."""
    monkeypatch.setattr(content_process, "_worker", None)
    monkeypatch.setattr(content_process, "_failed_starts", 0)
    monkeypatch.setattr(content_process, "_command", lambda: [sys.executable, "-c", "1"])
    lost = 0
    for _ in range(content_process._STARTS):
        with pytest.raises(ContentWorkerLost):
            await ask(whoami)
        lost += 1
    assert await ask(whoami) == os.getpid() and lost == content_process._STARTS
    monkeypatch.undo()
    assert await ask(whoami) != os.getpid()


@pytest_twisted.ensureDeferred
async def test_the_process_takes_the_same_text_and_fingerprint_as_the_thread(
    tmp_path: Path, clock: Clock
) -> None:
    results = {}
    with SampleSite(pages=30) as site:
        for worker in ("thread", "process"):
            settings = crawl_settings(
                str(tmp_path / f"{worker}.sqlite"), clock, INCRECRAWL_CONTENT_WORKER=worker
            )
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert len(result.items) == 30
            # The sample site's volatile parts (tokens, times) differ from one fetch to
            # the next; the fingerprint, which drops them, may not.
            results[worker] = {item["url"]: item["content_hash"] for item in result.items}
            assert all(item["markdown"].startswith("# Page ") for item in result.items)
    assert results["process"] == results["thread"]
    assert content_process._worker is not None and content_process._worker.alive


@pytest_twisted.ensureDeferred
async def test_a_killed_content_process_costs_only_the_pages_it_held(
    tmp_path: Path, clock: Clock
) -> None:
    """Killed mid-crawl (an out-of-memory kill, say): the crawl goes on with a new
    process; the pages in hand are site failures that report nothing, and the next
    run past their back-off records them."""
    killed: list[int] = []

    def kill_once(response: Any, request: Any, spider: Any) -> None:
        worker = content_process._worker
        if not killed and "/page/" in response.url and worker is not None and worker.alive:
            killed.append(worker.transport.pid)  # type: ignore[union-attr]
            os.kill(killed[0], signal.SIGKILL)

    db = str(tmp_path / "state.sqlite")
    with SampleSite(pages=40) as site:
        settings = crawl_settings(db, clock)
        first = await run_crawl(
            settings,
            sitemap_url=site.sitemap_url,
            hooks={signals.response_received: kill_once},
        )
        assert killed and first.reason == "finished"
        with StateStore(db) as store:
            unread = [url for url in site.page_urls() if store.get(url).content_hash is None]
        lost = first.stats.get(stats.CONTENT_WORKER_LOST, 0)
        assert len(unread) == lost and first.stats.get(stats.BACKED_OFF, 0) == lost
        assert first.changes("new") == set(site.page_urls()) - set(unread)
        clock.advance(2 * 86_400)
        again = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert again.changes("new") == set(unread)
        with StateStore(db) as store:
            assert all(store.get(url).content_hash for url in site.page_urls())
