"""Logs fit for production, with the project's defaults: no item dumps, a bounded
number of bytes a page, warnings repeated in the run summary; and feeds appended
run after run, each item carrying its run's id."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from increcrawl_scrapy.testing import SampleSite
from tests.support.process import crawl_command, run_process

#: The most log a page may cost with the defaults (bytes).
BYTES_A_PAGE = 1_500


def crawl(db: Path, sitemap: str, *settings: str, feed: Path | None = None):
    command = crawl_command(sitemap, db, "INCRECRAWL_FETCHER=direct", *settings, feed=feed)
    if feed is not None:  # -o appends, as cron runs do
        command[command.index("-O")] = "-o"
    return run_process(command, db.parent)


def test_the_default_log_is_small_and_dumps_no_item(tmp_path: Path) -> None:
    feed = tmp_path / "changes.jsonl"
    with SampleSite(pages=40) as site:
        done = crawl(tmp_path / "s.sqlite", site.sitemap_url, feed=feed)
    assert done.returncode == 0, done.stderr[-2000:]
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    assert len(items) == 40
    log = done.stderr
    per_page = len(log.encode()) / len(items)
    print(f"log bytes a page: {per_page:.0f}")
    assert per_page <= BYTES_A_PAGE, log[-3000:]
    for item in items:  # no item's text in the log
        line = next(part for part in item["markdown"].splitlines() if len(part) > 20)
        assert line not in log


def test_at_debug_items_are_named_not_dumped(tmp_path: Path) -> None:
    feed = tmp_path / "changes.jsonl"
    with SampleSite(pages=5) as site:
        done = crawl(tmp_path / "s.sqlite", site.sitemap_url, "LOG_LEVEL=DEBUG", feed=feed)
    assert done.returncode == 0, done.stderr[-2000:]
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    for item in items:
        assert f"item new {item['url']}" in done.stderr
        line = next(part for part in item["markdown"].splitlines() if len(part) > 20)
        assert line not in done.stderr


def test_every_feed_item_carries_its_run_id(tmp_path: Path) -> None:
    db, feed = tmp_path / "s.sqlite", tmp_path / "changes.jsonl"
    with SampleSite(pages=6) as site:
        assert crawl(db, site.sitemap_url, feed=feed).returncode == 0
        site.edit(1)
        site.edit(2)
        assert crawl(db, site.sitemap_url, feed=feed).returncode == 0
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    runs = [row[0] for row in sqlite3.connect(db).execute("SELECT id FROM runs ORDER BY id")]
    assert len(runs) == 2
    assert [item["run_id"] for item in items] == [runs[0]] * 6 + [runs[1]] * 2
    assert {item["change"] for item in items if item["run_id"] == runs[1]} == {"changed"}


def test_warnings_are_repeated_in_the_run_summary(tmp_path: Path) -> None:
    with SampleSite(pages=4) as site:
        for page in range(2):
            site.fail(page, 500)
        done = crawl(tmp_path / "s.sqlite", site.sitemap_url, "RETRY_TIMES=0", "INCRECRAWL_X=1")
    summary = done.stderr[done.stderr.index("Run summary for") :]
    assert "WARNING: Unknown setting INCRECRAWL_X is ignored" in summary
