"""Whether the items earlier runs held, released by this run, were delivered: a
row leaves the state only then (``pages/pending.py``).

An item is delivered once it passed every pipeline (``item_scraped``). One a
pipeline drops or fails (``item_dropped``, ``item_error``: a ``DropItem`` is no
delivery, whatever it meant) stays held, released again by the next run, as a page
whose change a later pipeline dropped or failed is reported again. A later pipeline
may hand on another object (``dict(item, cleaned=True)``, ``asdict``, a new one of
some fields without the add-on's labels): ``item_scraped`` names that, which may
share nothing with the item released. So each release response is accounted for:
Scrapy sends one of the three signals for every item yielded with it, naming that
response, and a drop or a failure names the object the pipelines were given (the
one yielded). Found by its object (or a copy with every field it was made of), an
item is known delivered at once. A copy of another shape is known by the add-on's
labels it carries (its ``change`` and page, ``pipelines.py``, which only an item
that reached our pipeline has): at the close, each delivered so names one not yet
known of its page and change, if no drop or failure named an object never yielded.
The others of a release are, at the close, if every item of that response has had
its signal and each drop or failure named one of them (or of the run's own items it
carried). If not (a spider middleware added or removed an item, a failure names an
object never yielded), they stay held and a later run delivers them again: at least
once, never lost. (A copy of the run's own gone item of the same page, labelled
alike, may stand for one a spider middleware removed: a narrow case.)
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals

from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import GONE, NEW
from increcrawl_scrapy.pages.pending import copy_of
from increcrawl_scrapy.state import StateLockedError, held_item_key

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


@dataclass
class _Release:
    """A release response's items: every object yielded with it, and the rows of
    those earlier runs held."""

    response: Any
    size: int  # the items yielded with it
    yielded: dict[int, Any]  # id -> each (kept: an id is not reused), until all had their signal
    rows: dict[int, tuple[Any, str]]  # id -> an earlier one not known delivered, its row
    failed: list[str] = field(default_factory=list)  # rows of those dropped or failed
    signals: int = 0  # the items of the response Scrapy said were delivered, dropped or failed
    unknown: int = 0  # drops and failures of objects never yielded: which, unknown
    labelled: list[str] = field(default_factory=list)  # rows' beginnings copies delivered named

    def counted(self) -> None:
        """One more of its items had its signal."""
        self.signals += 1
        if self.signals >= self.size:
            self.yielded = {}  # every one had: none kept longer

    def known(self, item: Any) -> int | None:
        held = self.rows.get(id(item))
        return id(item) if held is not None and held[0] is item else None

    def by_labels(self) -> list[str]:
        """At the close: the rows the labelled copies delivered name (each copy one),
        known delivered, unless a failure named an object never yielded."""
        named = []
        for begins in [] if self.unknown else self.labelled:
            found = next((k for k, (_, row) in self.rows.items() if row.startswith(begins)), None)
            if found is not None:
                named.append(self.rows.pop(found)[1])
        return named

    def copied(self, adapter: ItemAdapter | None) -> int | None:
        """The one *adapter* is a copy of: every field it was made of equal."""
        return next((key for key, (held, _) in self.rows.items() if copy_of(adapter, held)), None)


class ReleasedItems:
    """One crawl's release responses, until each item they carried is delivered."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self._releases: list[_Release] = []
        self._rows: dict[int, str] = {}  # of the release to come: id of each item -> its row
        crawler.signals.connect(self._delivered, signal=signals.item_scraped)
        crawler.signals.connect(self._failed, signal=signals.item_dropped)
        crawler.signals.connect(self._failed, signal=signals.item_error)

    def expect(self, rows: dict[int, str]) -> None:
        """A release handed earlier runs' items (by id) holding *rows* to a response."""
        self._rows.update(rows)

    def handed(self, response: Any, items: list[Any]) -> None:
        """*items*, every one yielded with *response*: a release's among them."""
        if not self._rows:
            return
        yielded = {id(item): item for item in items}
        rows, self._rows = self._rows, {}
        held = {key: (yielded.get(key), row) for key, row in rows.items()}
        release = _Release(response, len(items), yielded, held)
        release.unknown = sum(key not in yielded for key in rows)  # never so: never settled
        self._releases.append(release)

    def on_their_way(self) -> set[str]:
        """At the close: the rows of released items not known delivered, which stay
        (their release did not add up, or they were dropped or failed); the rows of
        the rest are deleted."""
        left: set[str] = set()
        for release in self._releases:
            for row in release.by_labels():
                self._drop(row)
            if release.signals == release.size and not release.unknown:
                for _, row in release.rows.values():  # delivered: a later pipeline's objects
                    self._drop(row)
                release.rows = {}
            left.update(row for _, row in release.rows.values())
            left.update(release.failed)
        return left

    def _of(self, response: Any) -> _Release | None:
        if response is None:
            return None
        return next((r for r in self._releases if r.response is response), None)

    def _delivered(self, item: Any, response: Any = None, **_: Any) -> None:
        release = self._of(response)
        if release is None:
            return
        found = release.known(item)
        adapter = _adapter(item)
        if found is None and adapter is not None and adapter.get("change") in (GONE, NEW):
            found = release.copied(adapter)  # a later pipeline's copy (else: at the close)
        if found is not None:
            self._drop(release.rows.pop(found)[1])
        elif release.yielded.get(id(item)) is not item and (begins := _labels(adapter)):
            release.labelled.append(begins)  # a copy of another shape: at the close
        release.counted()

    def _failed(self, item: Any, response: Any = None, **_: Any) -> None:
        release = self._of(response)
        if release is None:
            return
        found = release.known(item)
        if found is None and release.yielded.get(id(item)) is not item:
            # Not an object yielded (a spider middleware's copy): one of them, or unknown.
            found = release.copied(_adapter(item))
            release.unknown += found is None  # then none of the rest is known delivered
        if found is not None:
            release.failed.append(release.rows.pop(found)[1])
        release.counted()

    def _drop(self, row: str) -> None:
        with contextlib.suppress(StateLockedError):
            crawl_state(self.crawler).store.drop_held_item(row)


def _labels(adapter: ItemAdapter | None) -> str | None:
    """The beginning of the rows of the held items *adapter*'s labels name (its
    page's and change's), if our pipeline labelled it one released."""
    change = adapter.get("change") if adapter is not None else None
    page = adapter.get("normalized_url") if adapter is not None else None
    if change not in (GONE, NEW) or not page:
        return None
    return held_item_key(str(page), change, "")


def _adapter(item: Any) -> ItemAdapter | None:
    return ItemAdapter(item) if ItemAdapter.is_item(item) else None
