"""A change is written to the state only once its item is delivered: a later
pipeline that fails, or a crawl killed at any point, leaves the change to be
reported again by the next run, never lost."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.flaky import FailOncePipeline
from tests.support.process import crawl_command, crawl_env

DAY = 86_400.0


@pytest_twisted.ensureDeferred
async def test_a_later_pipeline_that_fails_loses_no_change(tmp_path: Path, clock: Clock) -> None:
    db = str(tmp_path / "state.sqlite")
    with SampleSite(pages=12) as site:
        settings = crawl_settings(
            db,
            clock,
            INCRECRAWL_POLICY="adaptive",
            ITEM_PIPELINES={"tests.flaky.FailOncePipeline": 800},
        )
        new_lost, changed_lost = site.page_url(3), site.page_url(6)
        FailOncePipeline.FAIL = {new_lost}
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert first.changes("new") == set(site.page_urls()) - {new_lost}
        with StateStore(db) as store:
            assert store.get(new_lost).last_fetched is None  # not recorded: still new
        site.edit(6)
        site.edit(7)
        FailOncePipeline.FAIL = {changed_lost}
        clock.advance(40 * DAY)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert second.changes("new") == {new_lost}  # reported again, and now delivered
        assert second.changes("changed") == {site.page_url(7)}
        clock.advance(40 * DAY)
        third = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert third.changes("changed") == {changed_lost}  # the failed change, again
        assert third.changes("new") == set()
        assert FailOncePipeline.failed == [new_lost, changed_lost]


def feed_changes(feed: Path, kind: str) -> set[str]:
    if not feed.exists():
        return set()
    items = []
    for line in feed.read_text().splitlines():
        try:
            items.append(json.loads(line))
        except ValueError:
            continue  # the line the kill cut
    return {item["url"] for item in items if item["change"] == kind}


def crawl(
    site: SampleSite, db: Path, feed: Path, kill_after: int | None, flush_items: int = 7
) -> bool:
    """Whether the crawl was killed (*kill_after* ms after its first items reached
    the feed)."""
    command = crawl_command(
        site.sitemap_url,
        db,
        "INCRECRAWL_FETCHER=direct",
        f"INCRECRAWL_FLUSH_ITEMS={flush_items}",
        "INCRECRAWL_FLUSH_SECONDS=3600",
        "INCRECRAWL_CLOCK=time.time",
        "LOG_LEVEL=INFO",
    )
    command += ["-o", f"{feed}:jsonlines"]
    log = feed.with_suffix(".log")
    with log.open("w") as err:  # a file: a pipe nobody reads would stall the crawl
        process = subprocess.Popen(
            command, env=crawl_env(None), cwd=db.parent, stdout=subprocess.DEVNULL, stderr=err
        )
        if kill_after is None:
            assert process.wait(timeout=300) == 0, log.read_text()[-2000:]
            return False
        deadline = time.monotonic() + 300
        while process.poll() is None and time.monotonic() < deadline:
            if feed.exists() and feed.stat().st_size > 0:  # items are being delivered
                time.sleep(kill_after / 1000)  # then at a random moment
                killed = process.poll() is None
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=60)
                return killed
            time.sleep(0.002)
        process.wait(timeout=60)
        return False


def test_sigkill_at_random_points_loses_no_change(tmp_path: Path) -> None:
    chance = random.Random(20261130)
    with SampleSite(pages=500) as site:
        for attempt in range(3):
            db = tmp_path / f"state{attempt}.sqlite"
            feeds = [tmp_path / f"{attempt}-{n}.jsonl" for n in range(4)]
            # Killed while pages are new, then a whole run: every page reported new.
            killed = [crawl(site, db, feeds[0], kill_after=chance.randint(0, 300))]
            crawl(site, db, feeds[1], kill_after=None)
            assert feed_changes(feeds[0], "new") | feed_changes(feeds[1], "new") == set(
                site.page_urls()
            )
            # 100 pages edited; killed again mid-run, then a whole run.
            edited = {site.page_url(i) for i in chance.sample(range(500), 100)}
            for url in edited:
                site.edit(int(url.rsplit("/", 1)[1]))
            with StateStore(db) as store:
                store.make_due(seed=site.sitemap_url)
            killed.append(crawl(site, db, feeds[2], kill_after=chance.randint(0, 300)))
            assert killed == [True, True]  # the kills came mid-run
            crawl(site, db, feeds[3], kill_after=None)
            caught = feed_changes(feeds[2], "changed") | feed_changes(feeds[3], "changed")
            assert caught == edited, (len(caught), len(edited))


def test_a_page_delivered_by_a_killed_run_and_then_deleted_is_reported_gone(
    tmp_path: Path,
) -> None:
    """The feed has the page (new) and the state does not (the kill came before the
    write): the state cannot tell it was delivered, so its 404 is reported gone, as
    its 200 would be reported new again."""
    with SampleSite(pages=200) as site:
        db, feeds = tmp_path / "state.sqlite", [tmp_path / "1.jsonl", tmp_path / "2.jsonl"]
        # No result written before the crawl's end: whatever the feed has, the state has not.
        assert crawl(site, db, feeds[0], kill_after=0, flush_items=100_000)
        with StateStore(db) as store:
            unwritten = [
                url
                for url in feed_changes(feeds[0], "new")
                if (page := store.get(url)) is not None and page.content_hash is None
            ]
        assert unwritten  # delivered, not recorded
        site.delete(int(unwritten[0].rsplit("/", 1)[1]))
        crawl(site, db, feeds[1], kill_after=None)
        assert unwritten[0] in feed_changes(feeds[1], "gone")
