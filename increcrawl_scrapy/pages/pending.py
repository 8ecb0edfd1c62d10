"""Verdicts held for a later run: the new and gone items a run that did not see
every page could not pair (``pages/moved.py``).

A run bounded by ``CLOSESPIDER_PAGECOUNT``, ``_ITEMCOUNT`` or ``_TIMEOUT`` (a large
site crawled a slice per cron run), or shut down, fetches some of the due pages: a
quote missing from page two may be on page three, which the next run fetches, and a
quote new on page two may have come from there. Such an item is neither delivered
nor lost: its page is recorded as it is now, and the item is kept in the state
(``StateStore.keep_held_items``: the seed's, one blob, at most MAX_HELD items), with
its print and its page. A later run pairs it as it pairs its own items: a gone item
and a new one identical (or with the same key) on another page moved, and neither
is delivered. What is left is delivered by the first run that sees every page it
reaches (it is idle: none of ``CLOSESPIDER_*`` came first), or once HELD_RUNS later
runs passed without its partner (a site crawled in slices that never reach idle):
``new`` or ``gone`` with the short fields that identify it.

Only the state keeps them between runs: nothing waits in memory for an event that
may not come (``spider_idle`` never does in a bounded run). They are read when the
crawl opens and written when it closes.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from increcrawl_scrapy.pages.memory import ItemPrint

#: Later runs an item is held through, at most, before its verdict is delivered.
HELD_RUNS = 3


@dataclass
class Pending:
    label: str  # NEW or GONE
    url: str  # its page's URL
    key: str | None  # its page's row when not its URL's (a postback's)
    old: ItemPrint  # its print
    runs: int = 0  # later runs it was held through


def pack(pending: list[Pending]) -> bytes:
    body = [[p.label, p.url, p.key, p.old.as_json(), p.runs] for p in pending]
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode("utf-8"), 6)


def unpack(blob: bytes | None) -> list[Pending]:
    if not blob:
        return []
    try:
        body: Any = json.loads(zlib.decompress(blob).decode("utf-8"))
        return [
            Pending(label, url, key, ItemPrint(*old), int(runs))
            for label, url, key, old, runs in body
        ]
    except (ValueError, TypeError, zlib.error):
        return []  # unreadable: nothing held (at worst an item moved is gone and new)
