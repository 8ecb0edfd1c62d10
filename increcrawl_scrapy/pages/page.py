"""A page of the add-on: a response's items under one page URL, their labels, its
result and the items it waits for (its items in flight: ``pages/in_flight.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import ARRIVED, GONE, MOVED, NEW, UNCHANGED
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from increcrawl_scrapy.pages.memory import ItemPrint
    from increcrawl_scrapy.schedule.rows import Recorded


@dataclass(eq=False)
class Page:
    url: str
    size: int
    #: What the page's fingerprint is taken of: its items' texts as the spider
    #: yielded them (before any pipeline), one rule for a page of one item or many.
    text: str
    recorded: Recorded | None = None  # the page's result, once its first item came
    memory: bytes | None = None  # what this fetch leaves for the next (pages/memory.py)
    matched: bool = False  # the items were matched against a previous version
    members: list[PageItem] = field(default_factory=list)  # its items, each with its label
    links: str = ""  # the response's own page: the URLs it led to, fingerprinted too
    status: int | None = None  # a page gone (404, 410: pages/gone.py); else its items say
    #: Its items are one of the page's versions of the previous run, exactly (an
    #: item several listings list, each their own way: pages/memory.py): unchanged.
    as_before: bool = False
    #: Another version of a page already grouped this run (an item another listing
    #: lists too) that has nothing to say: one item, its items not delivered again.
    again: bool = False
    #: Of its items to deliver, those not delivered yet: its result is written when
    #: none is left (``crawl/delivery.py``); set once its result is recorded.
    waiting: int = 0
    #: A run before closed with its new or gone items held: not held again
    #: (``pages/moved.py``).
    held_over: bool = False
    #: Its row's key when it is not the URL's: a postback's items (``postbacks.py``).
    key: str | None = None
    #: Answered by Scrapy's HTTP cache: not recorded (``http_cache.py``).
    cached: bool = False
    #: A page of one item that came alone (``item_alone``): not one of the add-on's
    #: pages, so its item is not counted among theirs (``increcrawl/items/...``).
    alone: bool = False
    #: Its items' keys (INCRECRAWL_ITEM_KEY) are rows of the site's, not the page's:
    #: items without a URL field, which move between a listing's pages (keyed.py).
    keyed_by_site: bool = False
    #: The hashes of its keys its previous version did not show (``keyed.py``).
    arrived: set[str] = field(default_factory=set)
    #: Keys' fingerprints as an earlier version kept them under their pages, for
    #: their rows of the site's (``keyed.py``: an upgrade).
    kept: dict[str, str] = field(default_factory=dict)
    #: An earlier run's page, recorded then: its item was held for a later run and
    #: is delivered now (``pages/pending.py``), its page not recorded again.
    earlier: bool = False

    @property
    def items_changed(self) -> bool:
        """Whether its items differ from its previous version's, by the match: a
        change of their own fields, which no way of taking a page's text touches."""
        return self.matched and any(member.label != UNCHANGED for member in self.members)

    @property
    def page_text(self) -> str:
        """What the page's fingerprint is taken of: its items' text, then its links."""
        return self.text + self.links

    def delivered(self, page_change: str) -> int:
        """How many of the page's items its result waits for when the page is
        *page_change* (a keyed item's own row waits for it: ``pages/keyed.py``)."""
        members = [member for member in self.members if member.item_key is None]
        changes = (item_change(page_change, self, member.label) for member in members)
        return sum(1 for change in changes if change not in (None, UNCHANGED, MOVED))


def item_change(page_change: str, group: Page, label: str) -> str | None:
    """An item's own label from its page's and the match (None: an item gone from a
    version not kept, nothing to say)."""
    if label in (MOVED, ARRIVED):  # moved between pages: the same item, not delivered
        return MOVED if label == MOVED else UNCHANGED
    if page_change == GONE:  # the page itself is gone, and each of its items
        return GONE
    if page_change == "changed" and group.matched:
        return label
    return None if label == GONE else page_change


@dataclass(eq=False)
class PageItem:
    group: Page
    item_key: str | None  # INCRECRAWL_ITEM_KEY's values, when set
    text: str = field(default="")  # the item's own canonical text (with a key)
    label: str = NEW  # against the page's previous version (pages/memory.match)
    changed_fields: list[str] = field(default_factory=list)
    whole: str = ""  # its print's hash: moves between pages (pages/moved.py), copies
    old: ItemPrint | None = None  # a gone item's print, as the previous version kept it
    moved: bool = False  # relabelled once the run's pages were in (pages/moved.py)
    item: Any = None  # the object the spider yielded (Scrapy's signals name it)
    seen_as: str = ""  # the print of that object, as a copy of it would show it
    #: The response it was yielded with (a weak reference): Scrapy's item signals
    #: name it, and so hand the item back to its page.
    via: Any = field(default=None, repr=False)
    #: The object the pipeline handed on, and the rows written once it is delivered.
    handed_on: Any = field(default=None, repr=False)
    rows: list[str] = field(default_factory=list)


def item_alone(item: Any, url: Any, text: str) -> PageItem:
    """*item* as a page of its own: the ``incremental`` spider's (one a page, grouped
    by the spider itself), or one no response's page knows (a project without
    ``PageItemsMiddleware``); *url*: its URL field's value, *text*: what its page's
    fingerprint is taken of. The pipeline then has one path for every item."""
    page = Page(url=url if isinstance(url, str) else "", size=1, text=text, alone=True)
    member = PageItem(page, None, item=item)
    page.members = [member]
    return member


def never_came(member: PageItem, settle: Callable[[str], None]) -> None:
    """An item a pipeline before ours dropped: its page does not wait for it (else
    the page's result is never written, and its items are new every run); *settle*
    counts one of a page's row's items as settled (``Delivery.settle``)."""
    group = member.group
    group.members = [other for other in group.members if other is not member]
    if group.recorded is None:
        return  # its page's result, once recorded, counts the items left
    change = item_change(group.recorded.outcome.change, group, member.label)
    # One of those it waits for (a moved one was, before it was relabelled).
    if member.moved or change not in (None, UNCHANGED, MOVED):
        settle(group.recorded.page.normalized_url)


def own_page(crawler: Any, url: str, urls: Iterable[str]) -> str | None:
    """Of *urls* (a response's items' pages), the one naming the page at *url*
    however it spells it; None: none does."""
    urls = list(urls)
    if url in urls:
        return url
    return next((page_url for page_url in urls if same_page(crawler, page_url, url)), None)


def same_page(crawler: Any, one: str, other: str) -> bool:
    """Whether *one* and *other* are the same page to the state (its keys: a trailing
    slash, another percent-encoding, a tracking parameter are the same page)."""
    if one == other:
        return True
    try:
        store = crawl_state(crawler).store
        return bool(store.normalize(one) == store.normalize(other))
    except (StateLockedError, ValueError):  # the database in use; not a page URL
        return False
