"""Verdicts held for a later run: the gone items a run that did not see every page
could not pair (``pages/moved.py``), and the new ones it delivered.

A run bounded by ``CLOSESPIDER_PAGECOUNT``, ``_ITEMCOUNT`` or ``_TIMEOUT`` (a large
site crawled a slice per cron run), or shut down, fetches some of the due pages: a
quote missing from page two may be on page three, which the next run fetches, and a
quote new on page two may have come from there. A gone item is neither delivered nor
lost: its page is recorded as it is now, and the item is kept in the state
(``StateStore.keep_held_item``: a row of its own under its page's, at most MAX_HELD
a run), with its print and its page (a gone item is no more than the short fields that identify
it). A new item is delivered by the run, whole (the object the spider yielded: the
state keeps no more than a print of an item), and its print is kept as DELIVERED: a
later run that finds it gone from another page takes it as moved, and delivers
nothing of it (a move whose new side came first is delivered ``new`` once). A close
with no response left to carry a new item keeps it whole (its class, every field)
for the next run to deliver.

A later run pairs them as it pairs its own items: a gone item and a new one
identical (or with the same key) on another page moved. What is left is delivered by
the first run that is complete (it went idle, none of ``CLOSESPIDER_*`` came first,
and every page it asked answered usably: ``pages/answers.py``), or by a bounded run
once the slices went round: every live page of the seed that was due when the item
was held (``held_at``, the clock at the close that held it) was fetched since (no
next check left at or before that time; a run in which a page failed holds its items
as if held again then). As a last resort, an item held HELD_FOR seconds since it was
first held (``first_held``: 30 days of the crawl's clock, failed pages or not: a page
the spider no longer reaches, or one that always fails, stays due) is delivered by
the next run. A DELIVERED print is kept as long.

Only the state keeps them between runs: nothing waits in memory for an event that
may not come (``spider_idle`` never does in a bounded run). They are read when the
crawl opens; a crawl adds the rows of those it holds and deletes those of the ones
it delivered or paired, never writing back what it read: two crawls at once (two
cron jobs, two nodes) keep each other's. A held item is its page's, not its seed's
(a project spider's seed is its name, and one spider may crawl several sites): a
run releases only those of the sites it got a response from (``site_of``), and one
it delivers leaves the state once it passed every pipeline (``item_scraped``, a
later pipeline's copy too: ``pages/released.py``): one a later pipeline fails or
drops stays held, released again by the next run, as a page whose item failed is
fetched again. The rows of a site no run crawls again
stay, a few bytes each.
"""

from __future__ import annotations

import json
import sys
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from itemadapter import ItemAdapter

from increcrawl_scrapy import compat
from increcrawl_scrapy.content.item_fingerprint import plain
from increcrawl_scrapy.pages.memory import ItemPrint
from increcrawl_scrapy.state import StateLockedError, held_item_key

if TYPE_CHECKING:
    from increcrawl_scrapy.pages.page import PageItem
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.state import StateStore

#: Seconds an item is held, at most, when the slices never go round (``held_at``).
HELD_FOR = 30 * 86_400.0
#: A new item delivered by a bounded run: its print kept to pair a later gone one.
DELIVERED = "delivered"


@dataclass
class Pending:
    label: str  # GONE, NEW (whole: a close left it undelivered) or DELIVERED
    url: str  # its page's URL
    key: str | None  # its page's row when not its URL's (a postback's)
    old: ItemPrint  # its print
    runs: int = 0  # later runs it was held through
    #: A new item's class and every field (``kept``), delivered as it was.
    item: list[Any] | None = None
    #: The clock when it was held (0: unknown, held by an earlier version); again
    #: at a run in which a page failed (the slices' round starts again).
    held_at: float = 0.0
    #: The clock when it was first held: HELD_FOR counts from it, failed pages or not.
    first_held: float = 0.0
    #: Its row in the state (``held_item_key``), once read from there.
    entry: str | None = None

    @property
    def site(self) -> str:
        return site_of(self.url)


def site_of(url: str) -> str:
    """The site a page is of: its scheme, host and port (two sites on one host
    differ by their ports, as two test servers on 127.0.0.1); "" for none."""
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.hostname}:{port}" if parts.hostname else ""


def pack(pending: list[Pending]) -> bytes:
    body = [
        [p.label, p.url, p.key, p.old.as_json(), p.runs, p.item, p.held_at, p.first_held]
        for p in pending
    ]
    return zlib.compress(json.dumps(body, separators=(",", ":")).encode("utf-8"), 6)


def unpack(blob: bytes | None, entry: str | None = None) -> list[Pending]:
    """The items *blob* holds (one, a row's: *entry*, ``held_items``)."""
    if not blob:
        return []
    try:
        body: Any = json.loads(zlib.decompress(blob).decode("utf-8"))
        return [
            Pending(
                label,
                url,
                key,
                ItemPrint(*old),
                int(runs),
                more[0] if more else None,
                float(more[1] or 0.0) if len(more) > 1 else 0.0,
                float(more[2] or 0.0) if len(more) > 2 else 0.0,  # none before: held_at
                entry=entry,
            )
            for label, url, key, old, runs, *more in body
        ]
    except (ValueError, TypeError, zlib.error):
        return []  # unreadable: nothing held (at worst an item moved is gone and new)


async def earlier_row(store: StateStore | None, member: PageItem) -> tuple[str, PageState | None]:
    """The row of the page an earlier run held *member* of, and the row as it stands
    (None: not at hand): a gone item is labelled by it (``pipelines.py``)."""
    url = member.group.url
    if store is None:
        return member.group.key or url, None
    try:
        key = member.group.key or store.normalize(url)
        if store.shared and not store.known(key):  # a read: off the reactor's thread
            await compat.in_thread(store.load, [key])
        return key, store.row(key)
    except ValueError:
        return url, None
    except StateLockedError:  # another crawl's transaction: labelled with what it has
        return key, None


def kept(item: Any) -> list[Any]:
    """A new item a close left undelivered, whole: its class and every field."""
    kind = type(item)
    fields = {name: plain(value) for name, value in ItemAdapter(item).items()}
    text = json.dumps(fields, ensure_ascii=False, default=str)
    return [f"{kind.__module__}.{kind.__qualname__}", json.loads(text)]


def rebuilt(item: list[Any]) -> Any:
    """The item *kept* kept: of its class again (a dict if it cannot be made). The
    state is data another machine may write: the class is looked up among modules
    the crawl imported, and made only if it is an item class (never a callable
    named by a row)."""
    path, fields = item
    module, _, name = str(path).rpartition(".")
    kind: Any = sys.modules.get(module)
    for part in name.split(".") if kind is not None else ():
        kind = getattr(kind, part, None)
    if not (isinstance(kind, type) and ItemAdapter.is_item_class(kind)):
        return dict(fields)
    try:
        return kind(**fields)
    except Exception:  # a class changed since, not made of these fields: the fields
        return dict(fields)


def held_row(store: StateStore, pending: Pending, taken: set[str]) -> str:
    """The row of an item held now: under its page's, one of each item (an item
    listed twice on its page: twice)."""
    try:
        page = pending.key or store.normalize(pending.url)
    except ValueError:
        page = pending.url
    entry = base = held_item_key(page, pending.label, pending.old.whole)
    twice = 1
    while entry in taken:
        twice += 1
        entry = f"{base}:{twice}"
    return entry


def copy_of(adapter: ItemAdapter | None, held: Any) -> bool:
    """Whether *adapter* is a copy of the earlier run's item *held*: every field
    it was made of (a gone one's: those that identify it) equal."""
    fields = ItemAdapter(held).asdict() if ItemAdapter.is_item(held) else {}
    return (
        adapter is not None
        and bool(fields)
        and all(adapter.get(name) == value for name, value in fields.items())
    )
