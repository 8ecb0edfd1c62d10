"""``IncrementalStatePipeline``: fingerprint, compare, record, label the item."""

from __future__ import annotations

import contextlib
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.content.fingerprint import (
    PatternTimeout,
    content_fingerprint,
    taken_prints,
)
from increcrawl_scrapy.content.item_fingerprint import item_text
from increcrawl_scrapy.crawl import hidden
from increcrawl_scrapy.crawl.delivery import Delivery
from increcrawl_scrapy.crawl.shared_state import CrawlState, crawl_state
from increcrawl_scrapy.log_formatter import NotDelivered
from increcrawl_scrapy.pages.in_flight import InFlight
from increcrawl_scrapy.pages.keyed import item_row
from increcrawl_scrapy.pages.memory import MOVED
from increcrawl_scrapy.pages.middleware import held_items, open_pages
from increcrawl_scrapy.pages.page import PageItem, item_alone, item_change
from increcrawl_scrapy.pages.pending import earlier_row
from increcrawl_scrapy.schedule.rows import ALIAS_MARK, Outcome, Recorded
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

#: Texts fingerprinted on the reactor's thread, at most (about 2 ms of work; larger
#: ones, and any with users' rules, which may backtrack, go to a worker thread).
INLINE_CHARS = 64 * 1024
#: Results written only once their item is delivered (``delivery.py``).
DELIVERED = (Outcome.NEW, Outcome.CHANGED, Outcome.GONE)


class IncrementalStatePipeline:
    """Works on any item type (itemadapter) that has a page URL
    (``INCRECRAWL_URL_FIELD``); fingerprints ``INCRECRAWL_CONTENT_FIELD`` if set,
    else the item itself (``item_fingerprint.py``). Items may carry ``http_status``
    (default 200), ``fetcher``, ``etag`` and ``last_modified``; the ``incremental``
    spider's items also carry the row's key (``normalized_url``)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> IncrementalStatePipeline:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = config_for(crawler)  # patterns checked
        self.store: StateStore | None = None
        self.state: CrawlState | None = None  # the crawl's, once open
        self.delivery: Delivery | None = None
        self.seed = ""
        self.run_id = 0  # the run row of the crawl (its id in `increcrawl status`)
        self.without_url = 0  # items passed through without state (warned once)
        self.validators: dict[str, tuple[str | None, str | None]] = {}
        #: The spider's own content field (the incremental spider's markdown).
        self.content_field: str | None = None
        #: Fingerprints taken off the reactor's thread for the item being recorded.
        self._taken: dict[str, str] = {}
        #: The crawl's items in flight, each with its page (PageItemsMiddleware's).
        self.pages: InFlight | None = None
        #: Taken with the text on the content thread (``spiders/page_content.py``).
        self._beforehand = taken_prints(crawler)

    def open_spider(self, spider: Spider | None = None) -> None:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return  # logged once; the crawl ends as soon as it is open
        self.state, self.store, self.seed = state, state.store, state.seed
        self.run_id = state.run.id
        self.validators = state.validators
        pages = open_pages(self.crawler)  # else its items are all alone
        if pages is None:
            pages = InFlight(self.config.url_field, self.config.volatile_fields)
        self.pages = pages
        self.delivery = state.delivery = Delivery(self.crawler, self.store, pages)
        self.content_field = getattr(self.crawler.spider, "increcrawl_content_field", None)

    def close_spider(self, spider: Spider | None = None) -> None:
        self.close_spider_counts()
        held = held_items(self.crawler)
        if held is not None and self.store is not None:  # no item is coming any more
            held.hold_over(self.store)
        if self.store is not None:  # written now, or on a shared state's writer thread
            stats.inc(self.crawler.stats, stats.REBASELINED, self.store.rebaselined)
            stats.inc(self.crawler.stats, stats.OLD_FINGERPRINTS, self.store.old_fingerprints)
            with contextlib.suppress(StateLockedError):  # said and handled at close
                self.store.hand_off()

    def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        # One of a page's items (the object yielded, or a copy of it), or an item alone.
        member = self.pages.take(item) if self.pages is not None else None
        if member is None:  # an item alone (the incremental spider's): a page of its own
            member = self._alone(item)
        if member.group.cached:
            return item  # a cached answer is not a fetch: delivered as it is (http_cache.py)
        if member.group.earlier:  # held by an earlier run, its page recorded then
            return self._earlier(item, member)
        if member.group.again:  # one item, delivered once a run
            stats.inc(self.crawler.stats, stats.ITEMS_LISTED_AGAIN)
            raise NotDelivered(f"{member.group.url}: listed again")
        if self.store is None:
            return self._process(item, member)
        keys = self._unread(item, member) if self.store.shared else []
        texts = [text for text in self._texts(item, member) if text not in self._beforehand]
        if not self.config.volatile_patterns and sum(map(len, texts)) < INLINE_CHARS:
            texts = []  # the default rules are linear: cheaper here than a thread hop
        if keys or texts:  # rows to read, texts to fingerprint: off the reactor's thread
            return self._after_preparing(item, member, keys, texts)
        return self._process(item, member)

    async def _earlier(self, item: Any, member: PageItem) -> Any:
        """*item*, held by an earlier run (``pages/pending.py``), labelled as the run
        that found it gone labels one: by its page's row, as it stands."""
        key, page = await earlier_row(self.store, member)
        adapter = ItemAdapter(item)
        _label(adapter, change=member.label, run_id=self.run_id, normalized_url=key)
        if page is not None:
            fetched_at = _iso(page.last_fetched)
            _label(adapter, content_hash=page.content_hash, fetched_at=fetched_at)
            _label(adapter, etag=page.etag, last_modified=page.last_modified)
        return item

    def _alone(self, item: Any) -> PageItem:
        """*item* as a page of one item (``pages/page.item_alone``)."""
        url = ItemAdapter(item).get(self.config.url_field) if ItemAdapter.is_item(item) else None
        text = self._text(ItemAdapter(item)) if url and isinstance(url, str) else ""
        return item_alone(item, url, text)

    async def _after_preparing(
        self, item: Any, member: PageItem, keys: list[str], texts: list[str]
    ) -> Any:
        assert self.store is not None
        if keys:
            await compat.in_thread(self.store.load, keys)
        if texts:
            try:
                hashes = await compat.in_thread(self._fingerprints, texts)
            except PatternTimeout as exc:  # the row stays as it is: due again
                stats.inc(self.crawler.stats, stats.PATTERN_TIMEOUTS)
                logger.error(
                    "%s: not recorded, %s", ItemAdapter(item).get(self.config.url_field), exc
                )
                raise DropItem(str(exc)) from None
            return self._process(item, member, dict(zip(texts, hashes, strict=True)))
        return self._process(item, member)

    def _texts(self, item: Any, member: PageItem) -> list[str]:
        """What recording *item* fingerprints: its page's text (a 2xx page whose
        result its group has not recorded yet), then its own (INCRECRAWL_ITEM_KEY)."""
        status = _status(ItemAdapter(item), member)
        if not member.group.url or (status is not None and not 200 <= int(status) < 300):
            return []
        texts = []
        if member.group.recorded is None:
            texts.append(member.group.page_text)
        if member.item_key is not None:
            texts.append(member.text)
        return texts

    def _fingerprints(self, texts: list[str]) -> list[str]:
        return [content_fingerprint(text, self.config.volatile_patterns) for text in texts]

    def _fingerprint(self, text: str) -> str:
        """The fingerprint of *text*, taken off the reactor beforehand when it could be."""
        taken = self._taken.get(text) or self._beforehand.pop(text)
        return taken or content_fingerprint(text, self.config.volatile_patterns)

    def _unread(self, item: Any, member: PageItem) -> list[str]:
        """The rows recording *item* would read from a shared state's table."""
        assert self.store is not None
        url = member.group.url
        if not url:
            return []
        try:
            page = ItemAdapter(item).get("normalized_url") or member.group.key
            page = page or self.store.normalize(url)
        except ValueError:
            return []  # not a page URL: nothing is recorded
        keys = [page]
        if member.item_key is not None:  # and the row an earlier version kept it in
            keys += [item_row(page, member), f"{page}#item:{member.item_key}"]
        return [key for key in keys if not self.store.known(key)]

    def _process(self, item: Any, member: PageItem, taken: dict[str, str] | None = None) -> Any:
        if self.store is None:  # another crawl holds the database: nothing is recorded
            raise DropItem("the state database is in use by another crawl")
        state = self.state
        assert state is not None  # open with its store
        if state.in_use is None:
            try:
                return self._process_recorded(item, member, taken or {})
            except StateLockedError as exc:  # another program's transaction, mid-run
                state.stop_in_use(exc)
        raise DropItem("not recorded: the state database is in use", log_level="DEBUG")

    def _process_recorded(self, item: Any, member: PageItem, taken: dict[str, str]) -> Any:
        assert self.store is not None and self.state is not None
        state = self.state
        adapter = ItemAdapter(item)
        self._taken = taken
        group = member.group
        # An item without a URL field belongs to the response it came from.
        url = group.url
        if not url:
            self._no_url(f"has no {self.config.url_field!r} field")
            return item  # not a page we can keep state for: delivered as it is
        status = _status(adapter, member)
        status = 200 if status is None else int(status)
        recorded = group.recorded
        first = recorded is None  # else recorded with the page's first item
        if recorded is None:
            recorded = self._record(adapter, url, status, member)
            if recorded is None:
                return item
            group.recorded = recorded
            if recorded.outcome is not Outcome.ERROR:
                state.hidden.checked(url)
                if 200 <= status < 300:
                    text = member.group.page_text if member is not None else self._text(adapter)
                    changed = recorded.outcome is Outcome.CHANGED
                    state.shared_links.saw(url, text, changed=changed)
        outcome, page = recorded.outcome, recorded.page
        assert self.delivery is not None and self.pages is not None
        # The item's own label: its page's, or against the page's previous version.
        change = item_change(outcome.change, group, member.label)
        if first and adapter.get("alias_of"):
            self.store.deliver(page.normalized_url)  # kept, scheduled, never reported
            stats.inc(self.crawler.stats, stats.ALIASES)
            state.hidden.fired(hidden.ALIAS, url)
            raise NotDelivered(f"{url} is {adapter.get('alias_of')} (rel=canonical)")
        if first:
            delivered = group.delivered(outcome.change)
            if outcome in DELIVERED and delivered:
                group.waiting = delivered  # the page's result waits for its items
                self.delivery.expect(page.normalized_url, group)
            else:
                self.store.deliver(page.normalized_url)  # nothing to report: written now
            if outcome is Outcome.ERROR:
                stats.inc(self.crawler.stats, stats.ERRORS)
                if adapter.get("site_failure"):
                    stats.inc(self.crawler.stats, stats.BACKED_OFF)
                raise DropItem(f"{url} failed ({status or 'no answer'})", log_level="DEBUG")
            stats.inc_result(self.crawler.stats, outcome.change, never_found=recorded.never_found)
        if member.moved and not first:
            self.delivery.settle(page.normalized_url)  # expected before it was found moved
        if change == MOVED:  # gone from here, on another page (pages/moved.py)
            raise NotDelivered(f"{url}: an item that moved to another page")
        keyed = member.item_key is not None
        if outcome in DELIVERED and not keyed and change not in (None, "unchanged"):
            # Written once delivered.
            self.pages.hand_on(member, item, page.normalized_url)
        content_hash = page.content_hash
        if keyed:
            own = self._record_item(item, url, page.normalized_url, member)
            change, content_hash = own.outcome.change, own.page.content_hash
        if change is None:  # gone from a page that is new again: nothing to say
            raise NotDelivered(f"{url}: an item of a version not kept")
        if change == "unchanged" and not group.alone:  # the add-on's items only
            stats.inc(self.crawler.stats, stats.ITEMS_UNCHANGED)
        _label(
            adapter,
            change=change,
            run_id=self.run_id,
            normalized_url=page.normalized_url,
            content_hash=content_hash,
            fetched_at=_iso(page.last_fetched),
            etag=page.etag,
            last_modified=page.last_modified,
        )
        if change == "changed" and member.changed_fields:
            _label(adapter, changed_fields=member.changed_fields)
        if self.config.export == "changes" and change == "unchanged":
            raise NotDelivered(f"{url} unchanged")
        return item

    def _record(
        self, adapter: ItemAdapter, url: str, status: int, member: PageItem
    ) -> Recorded | None:
        """Record the page's result (written once delivered); None if *url* is
        not a page URL."""
        assert self.store is not None
        content_hash = text = None
        if 200 <= status < 300:
            text = member.group.page_text
            content_hash = self._fingerprint(text)
            if member.group.as_before:  # one of its versions
                content_hash = self._kept_hash(url) or content_hash
            if adapter.get("alias_of"):  # its text is its canonical page's (canonical.py)
                text, content_hash = None, f"{ALIAS_MARK}{adapter.get('alias_of')}"
        validators = None
        # Only direct fetches see the origin's headers (hybrid: its probe's, kept).
        if adapter.get("fetcher") in ("direct", "hybrid"):
            validators = (adapter.get("etag"), adapter.get("last_modified"))
        elif self.validators and not member.group.key:  # seen by SkipNotDueMiddleware
            validators = self.validators.pop(url, None)  # on the page's response
        try:
            return self.store.record(
                url,
                status,
                seed=self.seed,
                key=adapter.get("normalized_url") or member.group.key,
                content_hash=content_hash,
                validators=validators,
                site_failure=bool(adapter.get("site_failure")),
                final_url=adapter.get("final_url") or None,
                moved=bool(adapter.get("moved_to")),
                content=text if self.config.keep_content else None,
                until_delivered=True,
                memory=member.group.memory,
                error_kind=adapter.get("error_kind"),
                items_changed=member.group.items_changed,
            )
        except ValueError as exc:  # not an absolute http(s) URL
            self._no_url(f"has a {self.config.url_field!r} that is not a page URL ({exc})")
            return None

    def _kept_hash(self, url: str) -> str | None:
        """The page's stored fingerprint: its items are one of its versions of the
        previous run (an item several listings list: ``pages/memory.py``), unchanged.
        Its row is at hand (loaded beforehand on a shared state: ``_unread``)."""
        assert self.store is not None
        try:
            page = self.store.get(url)
        except ValueError:
            return None
        return page.content_hash if page is not None else None

    def _record_item(self, item: Any, url: str, page_key: str, member: PageItem) -> Recorded:
        """An item with INCRECRAWL_ITEM_KEY: its own row (``pages/keyed.py``), its
        own label, written once the item is delivered."""
        assert self.store is not None and self.pages is not None
        key = item_row(page_key, member)
        if member.group.keyed_by_site and self.store.row(key) is None:
            # Kept under a page by an earlier version (maybe another one: it moved
            # since, pages/keyed.py): the site's row starts there.
            kept = self.store.row(f"{page_key}#item:{member.item_key}")
            content_hash = kept.content_hash if kept is not None else None
            content_hash = member.group.kept.get(member.item_key or "") or content_hash
            if content_hash:
                self.store.record(url, 200, seed=self.seed, key=key, content_hash=content_hash)
        recorded = self.store.record(
            url,
            200,
            seed=self.seed,
            key=key,
            content_hash=self._fingerprint(member.text),
            content=member.text if self.config.keep_content else None,
            until_delivered=True,
        )
        if recorded.outcome in DELIVERED:
            self.pages.hand_on(member, item, key)
        else:
            self.store.deliver(key)
        return recorded

    def _text(self, adapter: ItemAdapter) -> str:
        """What is fingerprinted: the content field, else the item itself."""
        field = self.config.content_field or self.content_field
        if field:
            content = adapter.get(field)
            if content is not None:
                return str(content)
        return item_text(adapter.item, self.config.volatile_fields)

    def _no_url(self, why: str) -> None:
        stats.inc(self.crawler.stats, stats.ITEMS_WITHOUT_URL)
        self.without_url += 1
        if self.without_url == 1:
            logger.warning(
                "An item %s: its state is not kept, it is delivered as it is (set "
                "INCRECRAWL_URL_FIELD to the field holding the page URL; the count is "
                "in increcrawl/items/without_url)",
                why,
            )

    def close_spider_counts(self) -> None:
        if self.without_url:
            logger.warning(
                "%d items had no usable page URL in %r: their state was not kept",
                self.without_url,
                self.config.url_field,
            )


def _status(adapter: ItemAdapter, member: PageItem) -> Any:
    """The HTTP status of the item's page: the item's ``http_status``, else its
    group's (a page gone, ``pages/gone.py``); None: a 200."""
    status = adapter.get("http_status")
    return member.group.status if status is None else status


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
