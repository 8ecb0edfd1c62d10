"""Remote feeds (s3://, gs://, ftp://: Scrapy uploads them when their slot closes):
a result is recorded as delivered only once its feed's upload is done. A failed
upload leaves the changes to be reported again by the next run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlparse

import pytest
import pytest_twisted
from scrapy.extensions.feedexport import BlockingFeedStorage

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


class UploadStorage(BlockingFeedStorage):
    """A remote storage as Scrapy's S3/FTP ones are: a local temporary file while
    exporting, uploaded (here: copied to the URI's path) when the slot closes, or
    refused while ``FAIL`` is set."""

    FAIL = False

    def __init__(self, uri: str, *, feed_options: dict[str, Any] | None = None) -> None:
        self.path = Path(urlparse(uri).path)

    def _store_in_thread(self, file: IO[bytes]) -> None:
        with file:  # closed as Scrapy's own storages close it, stored or not
            if UploadStorage.FAIL:
                raise OSError("the upload was refused")
            file.seek(0)
            with self.path.open("ab") as target:
                target.write(file.read())


def feed_settings(db: str, clock: Clock, feed: Path, **extra: Any) -> dict[str, Any]:
    return crawl_settings(
        db,
        clock,
        FEED_STORAGES={"upload": "tests.crawls.test_remote_feeds.UploadStorage"},
        FEEDS={f"upload://{feed}": {"format": "jsonlines"}},
        **extra,
    )


def uploaded(feed: Path) -> list[str]:
    if not feed.exists():
        return []
    return [json.loads(line)["url"] for line in feed.read_text().splitlines()]


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest_twisted.ensureDeferred
async def test_a_failed_upload_loses_no_change(
    request: pytest.FixtureRequest, tmp_path: Path, clock: Clock, backend: str
) -> None:
    db = (
        request.getfixturevalue("postgres_dsn")
        if backend == "postgresql"
        else str(tmp_path / "state.sqlite")
    )
    feed = tmp_path / "items.jsonl"
    with SampleSite(pages=6) as site:
        settings = feed_settings(db, clock, feed)
        UploadStorage.FAIL = True
        try:
            first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        finally:
            UploadStorage.FAIL = False
        assert len(first.changes("new")) == 6 and uploaded(feed) == []
        with StateStore(db) as store:  # nothing recorded as delivered
            assert all(store.get(url).last_fetched is None for url in site.page_urls())
        assert any("not uploaded" in line for line in first.log)
        clock.advance(DAY)
        second = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert second.changes("new") == set(site.page_urls())  # reported again
        assert sorted(uploaded(feed)) == sorted(site.page_urls())
        clock.advance(DAY)
        third = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert third.changes("new") == set()  # delivered once uploaded: not again


@pytest_twisted.ensureDeferred
async def test_uploads_in_batches_record_each_batch(tmp_path: Path, clock: Clock) -> None:
    db = str(tmp_path / "state.sqlite")
    feed = tmp_path / "items-%(batch_id)d.jsonl"
    with SampleSite(pages=6) as site:
        settings = feed_settings(db, clock, feed, FEED_EXPORT_BATCH_ITEM_COUNT=2)
        first = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(first.changes("new")) == 6
        files = sorted(tmp_path.glob("items-*.jsonl"))
        assert sum(len(uploaded(path)) for path in files) == 6
        # Watched through the exporter's public table of storages, the project's
        # class still names its uploads in Scrapy's stats.
        assert first.stats["feedexport/success_count/UploadStorage"] == 3
        with StateStore(db) as store:
            assert all(store.get(url).last_fetched is not None for url in site.page_urls())
