"""An extraction API answer without the content asked for (``data.markdown`` null or
absent, the origin's 200 in its metadata) is an error for that page: retried once,
counted, said, the page kept due and never recorded with the fingerprint of the empty
string (which made every later edit invisible). And a direct fetch answered 200 with
an empty body keeps the page's text; a page really empty is recorded, and said."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl
from tests.support.process import crawl_command, run_process

DAY = 86400.0


def unfetched(db: str | Path) -> int:
    with StateStore(str(db)) as store:
        return store.count(last_fetched=None)


@pytest.mark.parametrize("asked", ["html", "markdown"])
def test_answers_without_content_record_no_page_in_scrapy_crawl(tmp_path: Path, asked: str) -> None:
    db = tmp_path / "s.sqlite"
    formats = f"GEONODE_FORMATS={asked}"
    with SampleSite(pages=6) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        api.random_faults(1.0, kinds=("content_null",), endpoints=("extract",))
        feed = tmp_path / "first.jsonl"
        first = run_process(
            crawl_command(site.sitemap_url, db, formats, api_url=api.url, feed=feed),
            tmp_path,
            KEY,
        )
        assert "'geonode/errors/no_content': 12" in first.stderr  # each page tried twice
        said = f"[increcrawl_scrapy.geonode.middleware] WARNING: Geonode answer for {site.url}"
        warned = [line for line in first.stderr.splitlines() if said in line]
        assert sum(f"origin 200, but no {asked} as asked for" in line for line in warned) == 6
        assert first.returncode == 6, first.stderr[-3000:]  # too_many_errors: all failed
        assert not feed.exists() or feed.read_text().strip() == ""
        assert unfetched(db) == 6  # kept due, with no fingerprint

        api.clear_faults()
        feed = tmp_path / "second.jsonl"
        second = run_process(
            crawl_command(site.sitemap_url, db, formats, api_url=api.url, feed=feed),
            tmp_path,
            KEY,
        )
        assert second.returncode == 0, second.stderr[-3000:]
        items = [json.loads(line) for line in feed.read_text().splitlines()]
        assert {item["url"] for item in items if item["change"] == "new"} == set(site.page_urls())
        assert all(item["markdown"].strip() for item in items)


@pytest_twisted.ensureDeferred
async def test_an_answer_without_content_is_retried_and_edits_stay_visible(
    tmp_path: Path, clock: Clock
) -> None:
    with SampleSite(pages=6) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, api)
        api.inject("content_absent")  # the first answer: asked again
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert first.stats["geonode/errors/no_content"] == 1
        assert first.changes("new") == set(site.page_urls()) and unfetched(db) == 0
        assert all(item["markdown"].strip() for item in first.items)

        api.random_faults(1.0, kinds=("content_absent",), endpoints=("extract",))
        clock.advance(40 * DAY)
        blind = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert blind.items == [] and blind.stats["geonode/errors/no_content"] == 12

        api.clear_faults()
        site.edit(2)
        clock.advance(40 * DAY)
        edited = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert edited.changes("changed") == {site.page_url(2)}


@pytest_twisted.ensureDeferred
async def test_batch_results_without_content_record_no_page(tmp_path: Path, clock: Clock) -> None:
    with SampleSite(pages=8) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        db = str(tmp_path / "s.sqlite")
        settings = crawl_settings(db, clock, api, GEONODE_BATCH_MIN_URLS=5)
        api.random_faults(1.0, kinds=("content_absent",), endpoints=("batch_item",))
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert first.stats["geonode/batch/jobs"] >= 1
        assert first.stats["geonode/errors/no_content"] == 8
        assert first.changes("new") == set() and unfetched(db) == 8
        said = [line for line in first.log if line.startswith("WARNING increcrawl_scrapy.spiders")]
        assert sum("origin 200, but no content in the result" in line for line in said) == 8

        api.clear_faults()
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert second.changes("new") == set(site.page_urls())
