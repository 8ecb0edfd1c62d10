"""Items with a declared key (``INCRECRAWL_ITEM_KEY``): the key is the item's
identity, wherever it is listed.

An item that names its page by its URL field has its row under that page
(``PAGE#item:KEY``: the page is the item's own, the same from every listing). An
item without a URL field belongs to the response it came from, and a listing's
items move between its pages (one deleted, every later one a place up): its row is
the site's (``https://host/#item:KEY``), so a key that moved to another page is the
same row, unchanged or changed by its own fields, never ``new``.

Its page's memory keeps a print of each of its items whose hash is its key's
(``keyed_print``): a key the page showed last time and no longer shows is gone from
it (``keys_left``), and held for the run's end with the page's other gone items
(``pages/moved.py``): a key another page of the run showed moved there and is not
delivered; the rest are delivered ``gone``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter

from increcrawl_scrapy.pages.memory import ItemPrint, digest, item_print, unpack

if TYPE_CHECKING:
    from increcrawl_scrapy.pages.page import PageItem


def item_key(item: Any, fields: tuple[str, ...]) -> str:
    """The item's key: its *fields*' values."""
    adapter = ItemAdapter(item)
    return "|".join(f"{name}={adapter.get(name)}" for name in fields)


def keyed_print(item: Any, key: str, skip: frozenset[str] | tuple[str, ...]) -> ItemPrint:
    """*item*'s print whose hash is its *key*'s: two prints are the same item when
    their keys are equal, whatever their fields."""
    fields = item_print(item, skip)
    return ItemPrint(digest(f"key\0{key}"), fields.fields, fields.values)


def keys_left(blob: bytes | None, prints: list[ItemPrint]) -> tuple[list[ItemPrint], set[str]]:
    """Of the keys the page's previous fetch left in its memory (*blob*), those its
    items now (*prints*) do not show; and of those they show, the hashes of the ones
    it did not (arrived: from another page, maybe, which a bounded run may not see:
    ``pages/moved.py`` keeps their prints). A memory kept before keys were printed
    has none: nothing is gone, nothing arrived."""
    previous = unpack(blob)
    if previous is None:
        return [], set()
    now = {keyed.whole for keyed in prints}
    before = {old.whole for old in previous.items}
    return [old for old in previous.items if old.whole not in now], now - before


def item_row(page_key: str, member: PageItem) -> str:
    """The row of *member*'s key: its page's (an item naming its page), else its
    site's (``https://host/``)."""
    assert member.item_key is not None
    if member.group.keyed_by_site:
        scheme, _, rest = page_key.partition("://")
        page_key = f"{scheme}://{rest.split('/', 1)[0]}/"
    return f"{page_key}#item:{member.item_key}"
