"""``IncrementalStatePipeline``: fingerprint, compare, record, label the item."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from increcrawl_scrapy import stats
from increcrawl_scrapy.config import IncrecrawlConfig
from increcrawl_scrapy.delivery import Delivery
from increcrawl_scrapy.fingerprint import content_fingerprint
from increcrawl_scrapy.rows import Outcome
from increcrawl_scrapy.shared_state import crawl_state
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

UNCHANGED = (Outcome.UNCHANGED, Outcome.NOT_MODIFIED, Outcome.STILL_GONE)
#: Results written only once their item is delivered (``delivery.py``).
DELIVERED = (Outcome.NEW, Outcome.CHANGED, Outcome.GONE)


class IncrementalStatePipeline:
    """Works on any item type (itemadapter) that has a URL and a content field
    (``INCRECRAWL_URL_FIELD``, ``INCRECRAWL_CONTENT_FIELD``). Items may carry
    ``http_status`` (default 200), ``fetcher``, ``etag`` and ``last_modified``;
    the ``incremental`` spider's items also carry the row's key (``normalized_url``)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IncrementalStatePipeline:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = IncrecrawlConfig.from_settings(crawler.settings)  # patterns checked
        self.store: StateStore | None = None
        self.delivery: Delivery | None = None
        self.seed = ""

    def open_spider(self, spider: Spider | None = None) -> None:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return  # logged once; the crawl ends as soon as it is open
        self.store, self.seed = state.store, state.seed
        self.delivery = Delivery(self.crawler, self.store)

    def close_spider(self, spider: Spider | None = None) -> None:
        if self.store is not None:
            self.store.flush()

    def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        if self.store is None:  # another crawl holds the database: nothing is recorded
            raise DropItem("the state database is in use by another crawl")
        adapter = ItemAdapter(item)
        url = adapter.get(self.config.url_field)
        if not url:
            return item  # not a page: nothing to keep state for
        status = adapter.get("http_status")
        status = 200 if status is None else int(status)
        content = adapter.get(self.config.content_field)
        content_hash = None
        if 200 <= status < 300 and content is not None:
            content_hash = content_fingerprint(str(content), self.config.volatile_patterns)
        validators = None
        if adapter.get("fetcher") == "direct":  # only direct fetches see the origin's headers
            validators = (adapter.get("etag"), adapter.get("last_modified"))
        try:
            recorded = self.store.record(
                url,
                status,
                seed=self.seed,
                key=adapter.get("normalized_url") or None,
                content_hash=content_hash,
                validators=validators,
                site_failure=bool(adapter.get("site_failure")),
                final_url=adapter.get("final_url") or None,
                content=str(content) if self.config.keep_content and content_hash else None,
                hold=True,
            )
        except ValueError as exc:  # not an absolute http(s) URL
            stats.inc(self.crawler.stats, stats.INVALID_URLS)
            raise DropItem(f"cannot keep state for {url!r}: {exc}", log_level="WARNING") from None
        outcome, page = recorded.outcome, recorded.page
        if outcome in DELIVERED:
            assert self.delivery is not None
            self.delivery.hold(item, page.normalized_url)  # written once delivered
        else:
            self.store.deliver(page.normalized_url)  # nothing to report: written now
        if outcome is Outcome.ERROR:
            stats.inc(self.crawler.stats, stats.ERRORS)
            if adapter.get("site_failure"):
                stats.inc(self.crawler.stats, stats.BACKED_OFF)
            raise DropItem(f"{url} failed ({status or 'no answer'})", log_level="DEBUG")
        stats.inc(self.crawler.stats, stats.BY_CHANGE[outcome.change])
        _label(
            adapter,
            change=outcome.change,
            normalized_url=page.normalized_url,
            content_hash=page.content_hash,
            fetched_at=_iso(page.last_fetched),
            etag=page.etag,
            last_modified=page.last_modified,
        )
        if self.config.export == "changes" and outcome in UNCHANGED:
            raise DropItem(f"{url} unchanged", log_level="DEBUG")
        return item


def _label(adapter: ItemAdapter, **fields: Any) -> None:
    for name, value in fields.items():
        if name in ("etag", "last_modified") and adapter.get(name) is not None:
            continue
        with contextlib.suppress(KeyError):  # an item class without this field
            adapter[name] = value


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat(timespec="seconds")
