"""Nothing lost: a ``new``, ``changed`` or ``gone`` result is written to the state
only once its item has passed every pipeline and reached the feed exports
(``item_scraped``). An item a later pipeline drops or fails leaves its page as it
was, so the next run fetches it and reports the change again; so does a crash.

Feed exports write through a file buffer: before results are written, the feeds'
files are flushed to the operating system, so a killed crawl never has a result in
the state whose item is not in the feed.

A remote feed (s3://, gs://, ftp://, any storage but a local file or stdout) is
uploaded when its slot closes: at the end of the crawl, or per batch
(``FEED_EXPORT_BATCH_ITEM_COUNT``). Its items' results are delivered only once that
upload is done; a failed upload discards them (reported again next run), and the
crawl's state is closed only after the feed exporter closed.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from itemadapter import ItemAdapter
from scrapy import signals
from twisted.internet.defer import Deferred

from increcrawl_scrapy import compat, stats

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)


class Awaiting(Protocol):
    """What a page whose result waits for several items keeps: how many are still to
    come (the add-on's ``Page``)."""

    waiting: int


class Handed(Protocol):
    """An item the pipeline handed on: the rows its delivery writes."""

    rows: list[str]


class ItemsInFlight(Protocol):
    """The crawl's one registry of items in flight (``pages/in_flight.py``)."""

    def delivered(self, item: Any, response: Any = None) -> Handed | None:
        """The handed-on item *item* is (Scrapy's signal names it), taken off."""


@dataclass
class _Upload:
    """A remote feed slot's storage: the rows of its items, and whether it stored."""

    storage: Any
    keys: list[str] = field(default_factory=list)
    ok: bool = False


class Delivery:
    """Held results of one crawl, written once their items are delivered: each item
    found again by the crawl's registry of items in flight (*in_flight*)."""

    def __init__(self, crawler: Crawler, store: StateStore, in_flight: ItemsInFlight) -> None:
        self.crawler = crawler
        self.store = store
        self.in_flight = in_flight
        #: A page's row -> the page, which counts its items still to come.
        self._expected: dict[str, Awaiting] = {}
        store.write_first(self.flush_feeds)
        self._uploads: dict[int, _Upload] = {}  # id(storage) -> its upload
        self._open: dict[str, Any] = {}  # a feed's URI template -> its current storage
        self._awaiting: dict[str, int] = {}  # a row -> uploads of its items still to come
        self._remote = False  # a remote feed was opened
        #: Fired once the feed exporter closed (every upload done), if a feed is remote.
        self.exporter_closed: Deferred[None] = Deferred()
        exporter = self._feeds = self._exporter()
        if exporter is not None and isinstance(getattr(exporter, "storages", None), dict):
            self._watch_storages(exporter.storages)
            crawler.signals.connect(self._slot_closed, signal=signals.feed_slot_closed)
            crawler.signals.connect(self._exporter_closed, signal=signals.feed_exporter_closed)
        crawler.signals.connect(self.scraped, signal=signals.item_scraped)
        crawler.signals.connect(self.lost, signal=signals.item_dropped)
        crawler.signals.connect(self.lost, signal=signals.item_error)

    def expect(self, key: str, page: Awaiting) -> None:
        """*key*'s result is written once the items *page* waits for are delivered."""
        self._expected[key] = page

    def settle(self, key: str) -> None:
        """One of *key*'s expected items will not come (it moved to another page)."""
        if key in self._expected:
            self._count_delivered(key)

    def scraped(self, item: Any, response: Any = None, **_: Any) -> None:
        change = ItemAdapter(item).get("change") if ItemAdapter.is_item(item) else None
        if change in stats.BY_CHANGE:  # what the feeds got, by their label
            stats.inc(self.crawler.stats, stats.ITEMS_DELIVERED, change=change)
        uploads = self._uploads_of_item()  # the remote feeds the item went to
        member = self.in_flight.delivered(item, response)
        # An unchanged item is none of those its page waits for (INCRECRAWL_EXPORT =
        # "all"): it holds nothing, its labels name nothing.
        for key in member.rows if member is not None else ():
            for upload in uploads:
                upload.keys.append(key)
            if uploads:
                self._awaiting[key] = self._awaiting.get(key, 0) + len(uploads)
            self._count_delivered(key)

    def _count_delivered(self, key: str) -> None:
        page = self._expected.get(key)
        if page is not None:
            page.waiting -= 1
            if page.waiting > 0:
                return
            del self._expected[key]
        if not self._awaiting.get(key):
            self.store.deliver(key)

    def uploads_pending(self) -> Deferred[None] | None:
        """What the crawl's close waits for before the last results are written:
        the feed exporter's close, when a remote feed is being uploaded."""
        if not self._remote or self.exporter_closed.called:
            return None
        return self.exporter_closed

    # -- remote feeds ---------------------------------------------------------------

    def _exporter(self) -> Any:
        from scrapy.extensions.feedexport import FeedExporter

        return compat.component(self.crawler, self.crawler.get_extension, FeedExporter)

    def _watch_storages(self, storages: dict[str, Any]) -> None:
        """The exporter's storage classes by URI scheme (``FEED_STORAGES``, loaded):
        each remote one is replaced by a subclass whose uploads this delivery
        watches. The exporter builds every slot's storage from this public table."""
        from scrapy.extensions.feedexport import FileFeedStorage, StdoutFeedStorage

        for scheme, storage_class in list(storages.items()):
            if isinstance(storage_class, type) and not issubclass(
                storage_class, (FileFeedStorage, StdoutFeedStorage)
            ):
                storages[scheme] = self._watched(storage_class)

    def _watched(self, storage_class: type) -> type:
        delivery = self

        class Watched(storage_class):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                delivery._watch(self)

            def store(self, file: Any) -> Any:
                return delivery._stored(self, super().store(file))

        # Scrapy's log lines and stats name a storage by its class: still the project's.
        Watched.__name__ = storage_class.__name__
        Watched.__qualname__ = storage_class.__qualname__
        Watched.__module__ = storage_class.__module__
        return Watched

    def _watch(self, storage: Any) -> None:
        self._uploads[id(storage)] = _Upload(storage)
        self._remote = True

    def _stored(self, storage: Any, result: Any) -> Any:
        """*result* of *storage*'s ``store`` (a Deferred, an awaitable or a value),
        marking its upload done once it succeeds."""
        upload = self._uploads.get(id(storage))

        def stored(value: Any) -> Any:
            if upload is not None and upload.storage is storage:
                upload.ok = True
            return value

        if isinstance(result, Deferred):
            return result.addCallback(stored)
        if inspect.isawaitable(result):

            async def awaited() -> Any:
                return stored(await result)

            return awaited()
        return stored(result)

    def _uploads_of_item(self) -> list[_Upload]:
        """The remote uploads an item just exported went to: per feed, the slot that
        was open for it (the one before, if it just closed a batch)."""
        if not self._remote:
            return []
        found = []
        for slot in getattr(self._feeds, "slots", ()):
            storage = slot.storage
            before = self._open.get(slot.uri_template)
            self._open[slot.uri_template] = storage
            target = before if before is not None and before is not storage else storage
            upload = self._uploads.get(id(target))
            if upload is not None and upload.storage is target:
                found.append(upload)
        return found

    def _slot_closed(self, slot: Any, **_: Any) -> None:
        upload = self._uploads.get(id(slot.storage))
        if upload is None or upload.storage is not slot.storage:
            return
        del self._uploads[id(slot.storage)]
        if not upload.ok:
            dropped = sum(self.store.discard(key) for key in upload.keys)
            for key in upload.keys:
                self._awaiting.pop(key, None)
            logger.error(
                "Feed %s was not uploaded: its %d changes are reported again next run",
                slot.uri,
                dropped,
            )
            return
        for key in upload.keys:
            left = self._awaiting.get(key, 0) - 1
            if left > 0:
                self._awaiting[key] = left
            elif key in self._awaiting:
                del self._awaiting[key]
                if key not in self._expected:
                    self.store.deliver(key)

    def _exporter_closed(self, **_: Any) -> None:
        if not self.exporter_closed.called:
            self.exporter_closed.callback(None)

    def lost(self, item: Any, **_: Any) -> None:
        # (Dropped before our pipeline, an item of a page: pages/middleware.py.)
        member = self.in_flight.delivered(item)
        for key in member.rows if member is not None else ():
            self._expected.pop(key, None)
            if self.store.discard(key):
                logger.info("%s was not delivered: its change is reported again next run", key)

    def flush_feeds(self) -> None:
        for slot in getattr(self._feeds, "slots", ()):
            file = getattr(slot, "file", None)
            if file is not None and not getattr(file, "closed", False):
                file.flush()
