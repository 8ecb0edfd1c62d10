"""Nothing lost: a ``new``, ``changed`` or ``gone`` result is written to the state
only once its item has passed every pipeline and reached the feed exports
(``item_scraped``). An item a later pipeline drops or fails leaves its page as it
was, so the next run fetches it and reports the change again; so does a crash.

Feed exports write through a file buffer: before results are written, the feeds'
files are flushed to the operating system, so a killed crawl never has a result in
the state whose item is not in the feed.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals

from increcrawl_scrapy.page_groups import take

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)


class Delivery:
    """Held results of one crawl, keyed by their items until delivered."""

    def __init__(self, crawler: Crawler, store: StateStore) -> None:
        self.crawler = crawler
        self.store = store
        self._waiting: dict[int, list[str]] = {}  # id(item) -> the rows' keys
        self._expected: dict[str, int] = {}  # a page's row -> its items still to come
        store.results.before_write = self.flush_feeds
        crawler.signals.connect(self.scraped, signal=signals.item_scraped)
        crawler.signals.connect(self.lost, signal=signals.item_dropped)
        crawler.signals.connect(self.lost, signal=signals.item_error)

    def hold(self, item: Any, key: str) -> None:
        self._waiting.setdefault(id(item), []).append(key)

    def expect(self, key: str, items: int) -> None:
        """*key*'s result is written once all its *items* (a page's) are delivered."""
        self._expected[key] = items

    def scraped(self, item: Any, **_: Any) -> None:
        keys = self._waiting.pop(id(item), None)
        if keys is None:  # a later pipeline returned another object: our label says
            key = ItemAdapter(item).get("normalized_url") if ItemAdapter.is_item(item) else None
            keys = [key] if key else []
        for key in keys:
            left = self._expected.get(key, 1) - 1
            if left > 0:
                self._expected[key] = left
                continue
            self._expected.pop(key, None)
            self.store.deliver(key)

    def lost(self, item: Any, **_: Any) -> None:
        take(self.crawler, item)  # dropped before our pipeline: its page group goes too
        for key in self._waiting.pop(id(item), None) or ():
            self._expected.pop(key, None)
            if self.store.discard(key):
                logger.info("%s was not delivered: its change is reported again next run", key)

    def flush_feeds(self) -> None:
        from scrapy.extensions.feedexport import FeedExporter

        extensions = getattr(self.crawler.extensions, "middlewares", ())
        for extension in extensions:
            if isinstance(extension, FeedExporter):
                for slot in extension.slots:
                    file = getattr(slot, "file", None)
                    if file is not None and not getattr(file, "closed", False):
                        file.flush()
