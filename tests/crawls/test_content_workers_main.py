"""Content worker processes (``INCRECRAWL_CONTENT_PROCESSES``) never run the crawl's
``__main__`` again: a crawl script without an ``if __name__ == "__main__":`` guard
(a ``CrawlerProcess`` built, crawled and started at its top level, common in Scrapy
users' code), run as a file or with ``python -m``, ran a second crawl in its worker,
which truncated the first one's feed. ``scrapy runspider`` of a spider file with
top-level code, and ``scrapy crawl``, the same. Whole processes, as a user runs them,
against nginx, past the pages taken on the thread before a worker starts."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.crawl.content_processes import START_AFTER
from tests.crawls.test_content_processes import _write_pages
from tests.servers import nginx, nginx_binary
from tests.support.process import run_process

#: Pages past those taken on the thread: the worker takes the rest.
PAGES = START_AFTER + 16

#: Runs at import: what the crawl's ``__main__`` (or spider file) ran is counted.
_MARK = """
import os
import sys

with open(os.environ["MARKS"], "a") as marks:
    marks.write(f"{os.getpid()}\\n")
"""

#: A user's crawl script, unguarded: the crawl starts as the module is run.
_SCRIPT = (
    _MARK
    + """
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings

sitemap, db, feed = sys.argv[1:4]
settings = get_project_settings()
settings.set("INCRECRAWL_DB", db)
settings.set("INCRECRAWL_FETCHER", "direct")
settings.set("INCRECRAWL_CONTENT_PROCESSES", 1)
settings.set("LOG_LEVEL", "INFO")
settings.set("FEEDS", {feed: {"format": "jsonlines", "overwrite": True}})
process = CrawlerProcess(settings)
process.crawl("incremental", sitemap_url=sitemap)
process.start()
"""
)

#: A spider file for ``scrapy runspider``, with code at its top level.
_SPIDER = (
    _MARK
    + """
from increcrawl_scrapy.spiders.incremental import IncrementalSpider


class Unguarded(IncrementalSpider):
    name = "unguarded"
"""
)


def _command(way: str, work: Path, sitemap: str, db: Path, feed: Path) -> list[str]:
    scrapy = str(Path(sys.executable).parent / "scrapy")  # the console script, as users type it
    options = ["-a", f"sitemap_url={sitemap}", "-s", f"INCRECRAWL_DB={db}", "-O", str(feed)]
    options += ["-s", "INCRECRAWL_FETCHER=direct", "-s", "INCRECRAWL_CONTENT_PROCESSES=1"]
    options += ["-s", "LOG_LEVEL=INFO"]
    arguments = [sitemap, str(db), str(feed)]
    if way == "script":
        (work / "unguarded_crawl.py").write_text(_SCRIPT)
        return [sys.executable, "unguarded_crawl.py", *arguments]
    if way == "module":
        (work / "unguarded_crawl.py").write_text(_SCRIPT)
        return [sys.executable, "-m", "unguarded_crawl", *arguments]
    if way == "runspider":
        (work / "unguarded_spider.py").write_text(_SPIDER)
        return [scrapy, "runspider", "unguarded_spider.py", *options]
    return [scrapy, "crawl", "incremental", *options]


@pytest.mark.e2e
@pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed")
@pytest.mark.parametrize("way", ["script", "module", "runspider", "crawl"])
def test_a_worker_never_runs_the_crawls_main_again(tmp_path: Path, way: str) -> None:
    www, work = tmp_path / "www", tmp_path / "work"
    www.mkdir()
    work.mkdir()
    db, feed, marks = work / "state.sqlite", work / "feed.jsonl", work / "marks"
    with nginx(www, tmp_path / "nginx") as (url, _access):
        sitemap = _write_pages(www, url, PAGES, "div")
        done = run_process(
            _command(way, work, sitemap, db, feed), work, timeout=300, MARKS=str(marks)
        )
    log = done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "worker process(es) from page" in log  # a worker took pages
    lines = feed.read_text().splitlines()
    truncated = sum("\x00" in line for line in lines)  # overwritten under a writer
    assert (len(lines), truncated) == (PAGES, 0)
    urls = [json.loads(line)["url"] for line in lines]
    assert sorted(urls) == sorted(f"{url}/p/{i}.html" for i in range(PAGES))
    assert log.count("Spider opened") == 1
    with sqlite3.connect(db) as con:
        runs = con.execute("SELECT close_reason FROM runs").fetchall()
    assert runs == [("finished",)]
    if way != "crawl":  # the user's file ran once, in the crawl's process
        assert len(marks.read_text().splitlines()) == 1
