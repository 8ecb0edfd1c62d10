"""Items with a declared key (``INCRECRAWL_ITEM_KEY``): the key is the item's
identity, wherever it is listed.

An item that names its page by its URL field has its row under that page
(``PAGE#item:KEY``: the page is the item's own, the same from every listing). An
item without a URL field belongs to the response it came from, and a listing's
items move between its pages (one deleted, every later one a place up): its row is
the site's (``https://host/#item:KEY``), so a key that moved to another page is the
same row, unchanged or changed by its own fields, never ``new``.

Its page's memory keeps a print of each of its items whose hash is its key's
(``keyed_print``): a key the page showed last time and no longer shows left it
(``keys_left``). It is gone only when no page of the site lists it any more
(``KeyedSite``): not while a page read this run shows it, nor while the memory of
one not read again (it answered 304, was not due, a bounded run did not reach it)
does. A key gone is held for the run's end with the page's other gone items
(``pages/moved.py``): a key another page of the run showed moved there and is not
delivered; the rest are delivered ``gone``.

An earlier version kept a key's row under its page and no print of it in the page's
memory: a page's first reading since takes its keys from those rows
(``KeyedSite._kept_under``), and a key's row of the site's starts from its last row
under any page, so a key deleted since is ``gone`` and one moved since is not ``new``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter

from increcrawl_scrapy import compat
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import ItemPrint, digest, item_print, unpack
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.pages.page import Page, PageItem

#: The memory of the site's that lists the pages showing a key (by its hash).
LISTED = "#listed:"


def item_key(item: Any, fields: tuple[str, ...]) -> str:
    """The item's key: its *fields*' values."""
    adapter = ItemAdapter(item)
    return "|".join(f"{name}={adapter.get(name)}" for name in fields)


def keyed_print(item: Any, key: str, skip: frozenset[str] | tuple[str, ...]) -> ItemPrint:
    """*item*'s print whose hash is its *key*'s: two prints are the same item when
    their keys are equal, whatever their fields."""
    fields = item_print(item, skip)
    return ItemPrint(key_hash(key), fields.fields, fields.values)


def key_hash(key: str) -> str:
    """The hash of a key's prints (``keyed_print``)."""
    return digest(f"key\0{key}")


def keys_left(
    previous: list[ItemPrint] | None, prints: list[ItemPrint]
) -> tuple[list[ItemPrint], set[str]]:
    """Of the keys the page's previous fetch showed (*previous*: ``KeyedSite.previous``),
    those its items now (*prints*) do not show; and of those they show, the hashes of
    the ones it did not (arrived: from another page, maybe, which a bounded run may
    not see: ``pages/moved.py`` keeps their prints). A page without a memory has
    none: nothing is gone, nothing arrived."""
    if previous is None:
        return [], set()
    now = {keyed.whole for keyed in prints}
    before = {old.whole for old in previous}
    return [old for old in previous if old.whole not in now], now - before


def item_row(page_key: str, member: PageItem) -> str:
    """The row of *member*'s key: its page's (an item naming its page), else its
    site's (``https://host/``)."""
    assert member.item_key is not None
    if member.group.keyed_by_site:
        page_key = site_of(page_key)
    return f"{page_key}#item:{member.item_key}"


def site_of(page_key: str) -> str:
    """The site (``https://host/``) of the row *page_key*."""
    scheme, _, rest = page_key.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}/"


def key_values(key: str, fields: tuple[str, ...]) -> dict[str, str]:
    """The values *key* (``item_key``) was made of, as text: what identifies an item
    an earlier version kept no print of, when gone."""
    values: dict[str, str] = {}
    rest = key
    for name, after in zip(fields, (*fields[1:], ""), strict=True):
        if not rest.startswith(f"{name}="):
            break
        value, cut, tail = rest[len(name) + 1 :].partition(f"|{after}=" if after else "\0")
        values[name] = value
        rest = f"{after}={tail}" if cut else ""
    return values


class KeyedSite:
    """One crawl's keys of the site's (items without a URL field): a key is gone only
    when no page of the site lists it any more. A key a page drops is still listed by
    a page read this run that shows it (``shown``), or by one not read (it answered
    304, was not due, or a bounded run did not reach it) whose memory shows it. Which
    pages showed a key is a memory of the site's (``LISTED``): each page adds itself
    when a key arrives on it and takes itself off when it drops it; the list only
    names where to look, each page's memory says."""

    def __init__(self, crawler: Crawler, fields: tuple[str, ...]) -> None:
        self.crawler, self.fields = crawler, fields
        #: Of the pages read this run, the hashes of the keys they show.
        self.shown: dict[str, set[str]] = {}
        #: Per site, the rows an earlier version kept under their pages, once read.
        self.kept: dict[str, tuple[dict[str, list[tuple[str, float]]], dict[str, str]]] = {}

    async def left(
        self, page: Page, row: str | None, blob: bytes | None, prints: list[ItemPrint]
    ) -> list[ItemPrint]:
        """Of the keys *page*'s previous fetch showed (its memory, *blob*), those it
        no longer shows and no other page lists: gone (``page.arrived``: those new
        on it)."""
        page_key = row or self._normalize(page.url)
        memory = unpack(blob)
        previous = None if memory is None else memory.items
        if memory is not None and not memory.items and page.keyed_by_site and page_key:
            previous = await self._kept_under(page, page_key)
        left, page.arrived = keys_left(previous, prints)
        page.matched = bool(left)
        if not page.keyed_by_site or not page_key:
            return left
        now = {keyed.whole for keyed in prints}
        self.shown.setdefault(page_key, set()).update(now)
        listed = now - {old.whole for old in memory.items} if memory is not None else now
        for whole in listed:  # keys its memory did not list yet (or no print of)
            await self._list(page_key, whole, add=True)
        out = []
        for old in left:
            others = await self._list(page_key, old.whole, add=False)
            if not any([await self._shows(other, old.whole) for other in others]):
                out.append(old)
        return out

    async def _kept_under(self, page: Page, page_key: str) -> list[ItemPrint]:
        """The keys of a page whose memory an earlier version kept (no print of a
        key, a row each under the page, ``PAGE#item:KEY``): the rows its last reading
        wrote, not those of keys it dropped before (``page.kept``: every key's last
        fingerprint, wherever it was listed, for its row of the site's)."""
        site = site_of(page_key)
        if site not in self.kept:
            self.kept[site] = _by_page(await self._read("item_rows", site) or [])
        under, latest = self.kept[site]
        state = await self._read("row", page_key)
        # Written by its last reading: not before its last change, nor after its last
        # fetch (the root page's rows are named as the site's, which later runs write).
        since = (state.last_changed or 0.0) if state is not None else 0.0
        until = (state.last_fetched or float("inf")) if state is not None else float("inf")
        page.kept = latest
        return [
            ItemPrint(key_hash(key), {}, key_values(key, self.fields))
            for key, fetched in under.get(page_key, [])
            if since <= fetched <= until
        ]

    async def _list(self, page_key: str, whole: str, *, add: bool) -> set[str]:
        """The pages the key *whole* is listed by, *page_key* added or taken off (and
        written); those others than *page_key* returned."""
        key = f"{site_of(page_key)}{LISTED}{whole}"
        blob = await self._read("memory", "", key)
        pages = set(blob.decode("utf-8").split("\n")) - {""} if blob else set()
        known = page_key in pages
        if add != known:
            pages = pages | {page_key} if add else pages - {page_key}
            body = "\n".join(sorted(pages)).encode("utf-8")
            with contextlib.suppress(StateLockedError):  # nothing written: nothing read
                crawl_state(self.crawler).store.keep_memory(key, body, recorded=False)
        return pages - {page_key}

    async def _shows(self, page_key: str, whole: str) -> bool:
        """Whether the page *page_key* shows the key *whole*: as read this run, else
        as its memory says."""
        if page_key in self.shown:
            return whole in self.shown[page_key]
        memory = unpack(await self._read("memory", "", page_key))
        return memory is not None and any(kept.whole == whole for kept in memory.items)

    def _normalize(self, url: str) -> str | None:
        try:
            return str(crawl_state(self.crawler).store.normalize(url))
        except (StateLockedError, ValueError):
            return None

    async def _read(self, method: str, *args: Any) -> Any:
        """The store's *method* of *args* (off the reactor's thread on a shared state);
        None: the state in use, or not a page URL."""
        try:
            store = crawl_state(self.crawler).store
            call = getattr(store, method)
            return await compat.in_thread(call, *args) if store.shared else call(*args)
        except (StateLockedError, ValueError):
            return None


def _by_page(
    rows: list[tuple[str, float | None, str | None]],
) -> tuple[dict[str, list[tuple[str, float]]], dict[str, str]]:
    """Item rows (``StateStore.item_rows``): each page's keys with their last fetch,
    and each key's last fingerprint, wherever it was listed."""
    under: dict[str, list[tuple[str, float]]] = {}
    latest: dict[str, tuple[float, str]] = {}
    for name, fetched, content_hash in rows:
        page_key, _, key = name.partition("#item:")
        under.setdefault(page_key, []).append((key, fetched or 0.0))
        if content_hash and (fetched or 0.0) >= latest.get(key, (-1.0, ""))[0]:
            latest[key] = (fetched or 0.0, content_hash)
    return under, {key: content_hash for key, (_, content_hash) in latest.items()}
