"""A page's versions in one run: an item two listings list (its URL field names the
same page from two responses: a product in "shoes" and in "sale") is one item, never
two versions replacing each other (``pages/memory.py`` says how they are matched).

The first response that groups a page this run is matched against its previous
run's versions as any page is; a later one that is a version already seen this run
is ``again`` (not recorded, not delivered: one item); another version is matched
against the previous run's versions too, if none of the run's said a change yet,
and said if it is none of them; else ``again``. Each version seen joins the page's
memory, on its pages not recorded yet, else in the state (``amend_memory``), so the
next run knows each whatever order the listings answer in. A page is known from its
first response on, before its memory is read: a second listing's response that
comes meanwhile waits for that read (on a shared state it takes a thread hop), not
taken for a first of its own. At most MAX_VERSIONED
pages a run are followed so; past that a page's second version this run is matched
against its first.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet.defer import Deferred

from increcrawl_scrapy import compat
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import (
    MAX_ITEMS,
    UNCHANGED,
    ItemPrint,
    Match,
    Memory,
    dropping,
    match_versions,
    unpack,
    wholes,
)
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.pages.page import Page, PageItem

MAX_VERSIONED = 100_000


@dataclass
class Versions:
    """The versions of a page seen this run."""

    previous: bytes | None  # its memory before this run
    memory: bytes  # this run's: its versions so far
    seen: set[tuple[str, ...]]  # those versions
    pages: list[weakref.ref[Page]]  # its pages that write its memory (recorded)
    reported: bool = True  # a change of it is delivered this run (or it is new)
    loaded: bool = False  # its previous memory read (by its first page)
    failed: bool = False  # that read failed (its first page's items are lost with it)
    waiting: list[Deferred[None]] = field(default_factory=list)  # for that
    #: The previous run's ways not seen yet this run, carried over while every way
    #: seen is one of them (a listing that failed keeps its way known); dropped once
    #: a new way is seen, so that a later revert to one of them is a change.
    carried: set[tuple[str, ...]] = field(default_factory=set)


class PageVersions:
    """One crawl's pages' versions, owned by its ``PageItemsMiddleware``."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.pages: dict[str, Versions] = {}  # by the page's key
        self.volatile = config_for(crawler).volatile_fields

    async def match(
        self, page: Page, prints: list[ItemPrint], grouped: list[PageItem], own_url: bool
    ) -> list[ItemPrint]:
        """Label *page*'s items (*grouped*, of *prints*) against its previous version;
        returns the previous items gone."""
        key = page.key or self._key(page.url)  # a postback's items: their own row
        versions = self.pages.get(key) if key is not None else None
        if versions is None:
            return await self._first(page, key, prints, grouped, own_url)
        if not versions.loaded:  # the first's memory is being read
            waiter: Deferred[None] = Deferred()
            versions.waiting.append(waiter)
            await maybe_deferred_to_future(waiter)
            if versions.failed:  # the first's read failed, and its items with it
                return await self.match(page, prints, grouped, own_url)
        if wholes(prints) in versions.seen:  # the same as another listing's: one item
            _again(page, grouped)
            memory = unpack(versions.memory)
            if memory is not None and not memory.own:  # the page's own, seen at last
                owned = memory.with_own(unpack(page.memory))
                if owned.own:
                    versions.memory = owned.pack()
                    assert key is not None
                    await self._spread(key, versions)
            return []
        versions.seen.add(wholes(prints))
        versions.carried.discard(wholes(prints))
        memory, own = unpack(versions.memory), unpack(page.memory)
        if memory is not None:  # this run's versions, this one among them
            versions.memory = memory.with_version(prints[:MAX_ITEMS], own).pack()
        previous = None if versions.reported else self._previous(versions.previous)
        if previous is not None:
            page.held_over = previous.held
        left: list[ItemPrint] = []
        if previous is None:
            page.again = True
        elif len(prints) <= MAX_ITEMS:
            found, page.again = match_versions(previous, prints, own_url)  # as before
            if not page.again:
                left = _label(page, grouped, found)
        if page.again:
            _again(page, grouped)
        else:  # its change, delivered once this run
            versions.reported = True
            versions.pages.append(weakref.ref(page))
            self._drop_carried(versions)
        assert key is not None
        await self._spread(key, versions)
        return left

    async def _first(
        self,
        page: Page,
        key: str | None,
        prints: list[ItemPrint],
        grouped: list[PageItem],
        own_url: bool,
    ) -> list[ItemPrint]:
        """*page* is its URL's first this run: matched as any page."""
        versions = None
        if key is not None and page.memory is not None and len(self.pages) < MAX_VERSIONED:
            # Known at once: another listing's response may come while it is read.
            versions = Versions(None, page.memory, {wholes(prints)}, [weakref.ref(page)])
            self.pages[key] = versions
        left: list[ItemPrint] = []
        failed = True
        try:
            blob = await self.memory(page.url, page.key)
            previous = self._previous(blob)
            if previous is not None:
                page.held_over = previous.held
                current = unpack(page.memory)
                if current is not None and not current.own and previous.own:
                    # A listing's version alone this run (the page's own not due):
                    # what its own response left last time stays.
                    page.memory = current.with_own(previous).pack()
                    if versions is not None:
                        versions.memory = page.memory
            if previous is not None and len(prints) <= MAX_ITEMS:
                found, as_before = match_versions(previous, prints, own_url)
                page.as_before = as_before and previous.views is not None
                left = _label(page, grouped, found)
                if page.as_before and versions is not None:
                    assert previous is not None
                    self._carry(page, versions, previous, prints)
            if versions is not None:
                versions.previous = blob if previous is not None else None
                changed = left or any(member.label != UNCHANGED for member in grouped)
                versions.reported = not page.matched or bool(changed)
            failed = False
        finally:  # what the others wait for is known; a failure: the next is a first
            if versions is not None:
                if failed and key is not None:
                    versions.failed = True
                    self.pages.pop(key, None)
                versions.loaded = True
                waiting, versions.waiting = versions.waiting, []
                for waiter in waiting:
                    waiter.callback(None)
        return left

    @staticmethod
    def _carry(page: Page, versions: Versions, previous: Memory, prints: list[ItemPrint]) -> None:
        """The first way seen is one of the previous run's: the others are carried
        over until seen, or until a new way is (``Versions.carried``)."""
        memory = unpack(versions.memory)
        if memory is None:
            return
        for way in previous.versions():
            if wholes(way) != wholes(prints):
                memory = memory.with_version(way)
                versions.carried.add(wholes(way))
        versions.memory = page.memory = memory.pack()

    @staticmethod
    def _drop_carried(versions: Versions) -> None:
        memory = unpack(versions.memory)
        if versions.carried and memory is not None:
            versions.memory = dropping(memory, versions.carried).pack()
        versions.carried.clear()

    async def _spread(self, key: str, versions: Versions) -> None:
        """The page's memory, its versions so far, to its pages not recorded yet, and
        to the state once one is (the later a page is recorded, the more it knows)."""
        recorded = False
        for ref in versions.pages:
            page = ref()
            if page is None or page.recorded is not None:
                recorded = True
            else:
                page.memory = versions.memory
        if not recorded:
            return
        try:
            store = crawl_state(self.crawler).store
        except StateLockedError:
            return
        if store.shared:
            await compat.in_thread(store.amend_memory, key, versions.memory)
        else:
            store.amend_memory(key, versions.memory)

    def _previous(self, blob: bytes | None) -> Memory | None:
        """The page's memory before this run, with no field named volatile since."""
        memory = unpack(blob)
        return memory.without(self.volatile) if memory is not None else None

    def _key(self, url: str) -> str | None:
        """The state's key of *url* (None: not a page URL, or no state)."""
        try:
            return crawl_state(self.crawler).store.normalize(url)
        except (StateLockedError, ValueError):
            return None

    async def memory(self, url: str, key: str | None = None) -> bytes | None:
        """The page's memory (read off the reactor's thread on a shared state);
        *key*: its row's, when not its URL's (a postback's)."""
        try:
            store = crawl_state(self.crawler).store
        except StateLockedError:
            return None
        try:
            if store.shared:
                return await compat.in_thread(store.memory, url, key)
            return store.memory(url, key)
        except ValueError:
            return None  # not a page URL


def _label(page: Page, grouped: list[PageItem], found: Match) -> list[ItemPrint]:
    """*page*'s items labelled by *found*; the previous items gone."""
    page.matched = True
    for member, (label, fields) in zip(grouped, found.labels, strict=True):
        member.label, member.changed_fields = label, fields
    return found.gone


def _again(page: Page, grouped: list[PageItem]) -> None:
    """*page* is a version of a page said already this run: one item, not again."""
    page.again = True
    for member in grouped:
        member.label = UNCHANGED
