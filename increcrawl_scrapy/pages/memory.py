"""What a page's fetch leaves for the next one, and how a page's items are matched
across its versions without ``INCRECRAWL_ITEM_KEY``.

A page's memory holds a print of each of its items (the hash of the whole item, a
hash of each field, and the short values that identify it when it is gone) and the
requests its response produced (Scrapy's ``request_to_dict``, as ``JOBDIR`` keeps
them), so that a page skipped as not due, or answered 304, still leads where it led.
Both are bounded: ``MAX_ITEMS`` prints and ``MAX_REQUESTS`` requests a page. It
also keeps the request that reached the page (``kept_requests.py``: its method,
headers, body, cookies and plain meta, as the crawl sent it), so that a page no link
leads to any more is asked as the crawl asked (``pages/unreached.py``); a memory
stored before it was kept has none.

The matching rule, between the page's items now and its previous version's:

1. an item identical to one of the previous version's (all fields, less the volatile
   ones) is that item, unchanged;
2. of the rest, in page order, each is the previous item (not yet matched) sharing
   the most equal field values, if at least half of its fields are equal (ties:
   the nearest in position): it is ``changed``, with the fields that differ in
   ``changed_fields``. A field that goes one to one with another one across the
   page's items, where values repeat (a portrait URL made of the author), is not
   counted: it would count one coincidence twice (``_derived``);
3. a page that is its item's own (the item's URL field names it: *own_url*) had
   one item and has one item: it is the same item, by its URL. Elsewhere a count is
   no evidence ("one item and one item": the last page of a listing held one item
   and holds another one, the first moved a page up);
4. what is left is ``new`` now, or ``gone`` from before; across the run's pages, a
   gone item identical to a new one of another page moved (``pages/moved.py``).

A page may have several versions in one run: an item two listings list (its URL
field names its page from both), each listing showing it its own way (the listing
it was found in). They are one item, never versions of each other: the memory keeps
each (``Memory.views``, in an order of their own, so the order the listings answer
in makes no difference), and a version is matched against the nearest of the
previous run's (``match_versions``): one of them exactly is the item as before.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

from itemadapter import ItemAdapter

from increcrawl_scrapy.content.item_fingerprint import ADDED_FIELDS, item_text, plain

MAX_ITEMS = 1_000
MAX_REQUESTS = 1_000
#: A field value kept to identify a gone item: its JSON at most this long.
MAX_VALUE = 300
NEW, CHANGED, UNCHANGED, GONE = "new", "changed", "unchanged", "gone"
#: Across pages (pages/moved.py): gone from its page, on another one; there, arrived.
MOVED, ARRIVED = "moved", "arrived"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class ItemPrint:
    whole: str  # the hash of the item's canonical text
    fields: dict[str, str]  # field -> hash of its value
    values: dict[str, Any]  # short field values (what identifies the item when gone)

    def as_json(self) -> list[Any]:
        return [self.whole, self.fields, self.values]


def item_print(item: Any, skip: frozenset[str] | tuple[str, ...] = ()) -> ItemPrint:
    left_out = ADDED_FIELDS | frozenset(skip) | {"changed_fields"}
    fields: dict[str, str] = {}
    values: dict[str, Any] = {}
    for name, value in ItemAdapter(item).items():
        if name in left_out:
            continue
        text = json.dumps(plain(value), sort_keys=True, ensure_ascii=False, default=str)
        fields[name] = digest(text)
        if len(text) <= MAX_VALUE:
            values[name] = json.loads(text)
    return ItemPrint(item_whole(item, skip), fields, values)


def item_whole(item: Any, skip: frozenset[str] | tuple[str, ...] = ()) -> str:
    """The hash of the whole item, less the added and the *skip* fields."""
    return digest(item_text(item, skip))


@dataclass
class Memory:
    items: list[ItemPrint] = field(default_factory=list)
    #: The response's requests; None when one could not be kept (its callback not a
    #: spider method, say, or too many): the page is then never skipped.
    requests: list[dict[str, Any]] | None = field(default_factory=list)
    #: Its items came with the page's own response (not a listing's, by their URL
    #: field): the page's 404 says they are gone. Kept apart from ``requests``, which
    #: may be None for a page of its own too (too many, or not plain data).
    own: bool = True
    #: Kept by an earlier version whose run closed with new or gone items of the
    #: page held (``pages/moved.py``): the next fetch delivers them at once.
    held: bool = False
    #: The request that reached the page (``kept_request``); None when it could not
    #: be kept, or the memory is older than this field.
    request: dict[str, Any] | None = None
    #: The sizes of the page's versions in *items*, one after the other, when the
    #: run saw several (an item two listings list); None: one.
    views: list[int] | None = None
    #: A listing's row (``listings.py``): links only, no items. With requests None,
    #: one that is fetched whenever asked (it set a cookie, answered 404, ...).
    listing: bool = False
    #: What the requests that reached the page passed on to its callback, a digest
    #: by the page each came from (``passed_data.py``); None: nothing.
    passed: dict[str, str] | None = None

    def pack(self) -> bytes:
        body: dict[str, Any] = {
            "items": [p.as_json() for p in self.items],
            "requests": self.requests,
            "own": self.own,
        }
        if self.held:
            body["held"] = True
        if self.request is not None:
            body["request"] = self.request
        if self.views is not None:
            body["views"] = self.views
        if self.listing:
            body["listing"] = True
        if self.passed is not None:
            body["passed"] = self.passed
        return zlib.compress(json.dumps(body, separators=(",", ":")).encode("utf-8"), 6)

    def versions(self) -> list[list[ItemPrint]]:
        """The page's versions of its last run (one, unless several were seen)."""
        if self.views is None:
            return [self.items]
        out, start = [], 0
        for size in self.views:
            out.append(self.items[start : start + size])
            start += size
        return out

    def without(self, skip: frozenset[str] | tuple[str, ...]) -> Memory:
        """This memory as if its items' *skip* fields (volatile now, a setting changed
        since it was kept) were never printed: no field named volatile is compared.
        An item whose every value was kept gets its whole hash again; one with a long
        value keeps its old one, and is matched by its fields (``match``, rule 2)."""
        items, stripped = [], False
        for old in self.items:
            if not any(name in skip for name in old.fields):
                items.append(old)
                continue
            stripped = True
            fields = {name: value for name, value in old.fields.items() if name not in skip}
            values = {name: value for name, value in old.values.items() if name not in skip}
            whole = item_whole(values, skip) if set(values) == set(fields) else old.whole
            items.append(ItemPrint(whole, fields, values))
        if not stripped:
            return self
        return Memory(
            items, self.requests, own=self.own, held=self.held, request=self.request,
            views=self.views, passed=self.passed,
        )  # fmt: skip

    def with_own(self, own: Memory | None) -> Memory:
        """This memory with what the page's own response left (*own*: its requests,
        the request that reached it, its items its own), when it has none of its own:
        a listing's version seen first or alone keeps the page's own for its next
        fetch, its 404, its check (``pages/versions.py``)."""
        if self.own or own is None or not own.own:
            return self
        return Memory(
            self.items, own.requests, own=True, held=self.held, request=own.request,
            views=self.views, passed=own.passed,
        )  # fmt: skip

    def with_version(self, items: list[ItemPrint], own: Memory | None = None) -> Memory:
        """This memory with another version of the page, the versions in the order
        of their items' hashes (whatever order they came in), at most MAX_ITEMS items;
        the requests (and the request, and whether its items are its own) of the
        page's own response, whichever version kept them (*own*: the new version's)."""
        known = {wholes(view): view for view in self.versions()}
        known.setdefault(wholes(items), items)  # a way kept already is kept once
        views = sorted(known.values(), key=wholes)
        kept: list[ItemPrint] = []
        sizes: list[int] = []
        for view in views:
            if len(kept) + len(view) > MAX_ITEMS:
                break
            kept += view
            sizes.append(len(view))
        theirs = own if own is not None and own.own else None
        return Memory(
            kept,
            self.requests if self.requests is not None or theirs is None else theirs.requests,
            own=self.own or theirs is not None,
            held=self.held,
            request=self.request if self.request is not None or theirs is None else theirs.request,
            views=sizes,
            passed=self.passed if self.request is not None or theirs is None else theirs.passed,
        )


def dropping(memory: Memory, ways: set[tuple[str, ...]]) -> Memory:
    """*memory* without the versions *ways* (``wholes``) names."""
    views = [view for view in memory.versions() if wholes(view) not in ways]
    items = [old for view in views for old in view]
    return Memory(
        items, memory.requests, own=memory.own, held=memory.held, request=memory.request,
        views=[len(view) for view in views], passed=memory.passed,
    )  # fmt: skip


def wholes(items: list[ItemPrint]) -> tuple[str, ...]:
    """What a version of a page is, in any order of its items."""
    return tuple(sorted(item.whole for item in items))


def unpack(blob: bytes | None) -> Memory | None:
    if blob is None:
        return None
    try:
        body = json.loads(zlib.decompress(blob).decode("utf-8"))
        items = [ItemPrint(whole, fields, values) for whole, fields, values in body["items"]]
        requests = body["requests"]
        # Kept before "own" was: its own, the safer guess. A page's own requests were
        # None too when they could not be kept (meta that is not plain data), and a
        # 404 of a page whose items a listing gave says the same of them.
        own = bool(body.get("own", True))
        held = bool(body.get("held", False))
        request = body.get("request")
        views = body.get("views")
        listing = bool(body.get("listing", False))
        passed = body.get("passed")
        if views is not None and sum(views) != len(items):
            raise ValueError("versions that are not its items")
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error):
        return None  # unreadable: as if none was kept (the page is fetched)
    request = request if isinstance(request, dict) else None
    if not isinstance(passed, dict) or not all(isinstance(v, str) for v in passed.values()):
        passed = None
    return Memory(
        items, requests, own=own, held=held, request=request, views=views, listing=listing,
        passed=passed,
    )  # fmt: skip


@dataclass
class Match:
    """The label of each current item (by position) and the previous items gone."""

    labels: list[tuple[str, list[str]]]  # (change, changed_fields)
    gone: list[ItemPrint]


def match(previous: list[ItemPrint], current: list[ItemPrint], own_url: bool = False) -> Match:
    """The rule of this module's docstring; *own_url*: the current items name their
    page by their URL field."""
    labels: list[tuple[str, list[str]] | None] = [None] * len(current)
    left = dict(enumerate(previous))  # previous items not matched yet
    by_whole: dict[str, list[int]] = {}
    for index, old in left.items():
        by_whole.setdefault(old.whole, []).append(index)
    rest = []
    for position, now in enumerate(current):  # 1. identical
        same = by_whole.get(now.whole)
        if same:
            del left[same.pop(0)]
            labels[position] = (UNCHANGED, [])
        else:
            rest.append(position)
    if own_url and len(previous) == 1 and len(current) == 1 and rest and left:  # 3. by URL
        (index,) = left
        labels[0] = _changed(left.pop(index), current[0])
        rest = []
    derived = _derived(previous + current) if rest and left else set()
    for position in rest:  # 2. the most equal fields, at least half
        now = current[position]
        names = [name for name in now.fields if name not in derived]
        best, best_key = None, None
        for index, old in left.items():
            equal = sum(1 for name in names if old.fields.get(name) == now.fields[name])
            if 2 * equal < max(len(names), 1):
                continue
            key = (equal, -abs(index - position))
            if best_key is None or key > best_key:
                best, best_key = index, key
        if best is None:
            labels[position] = (NEW, [])
        else:
            labels[position] = _changed(left.pop(best), now)
    return Match([label or (NEW, []) for label in labels], list(left.values()))


def _derived(items: list[ItemPrint]) -> set[str]:
    """The fields that say no more than another one: across *items*, where some
    value repeats, each value of it goes with one of an earlier field's and back (a
    portrait URL made of the author). Fields in name order; a derived one skipped."""
    items = list({item.whole: item for item in items}.values())  # each item once
    names = sorted({name for item in items for name in item.fields})
    derived: set[str] = set()
    for at, first in enumerate(names):
        if first in derived:
            continue
        for other in names[at + 1 :]:
            if other in derived:
                continue
            pairs = {(item.fields.get(first), item.fields.get(other)) for item in items}
            if len(pairs) == len(items):
                continue  # no value repeats: no evidence of a bond
            if len({one for one, _ in pairs}) == len(pairs) == len({two for _, two in pairs}):
                derived.add(other)
    return derived


def match_versions(
    previous: Memory, current: list[ItemPrint], own_url: bool = False
) -> tuple[Match, bool]:
    """*current* matched against *previous*, and whether it is one of the previous
    run's versions exactly (then all unchanged, whatever the others were). Of
    several versions, the nearest: the most items unchanged, then changed, then the
    fewest fields changed (ties: the first in their order)."""
    versions = previous.versions()
    if len(versions) == 1:
        found = match(previous.items, current, own_url)
        return found, not found.gone and all(label == UNCHANGED for label, _ in found.labels)
    if any(wholes(version) == wholes(current) for version in versions):
        return Match([(UNCHANGED, [])] * len(current), []), True
    best: Match | None = None
    best_score: tuple[int, int, int] | None = None
    for version in versions:
        found = match(version, current, own_url)
        labels = [label for label, _ in found.labels]
        fields = sum(len(changed) for _, changed in found.labels)
        score = (labels.count(UNCHANGED), labels.count(CHANGED), -fields)
        if best_score is None or score > best_score:
            best, best_score = found, score
    assert best is not None
    return best, False


def _changed(old: ItemPrint, now: ItemPrint) -> tuple[str, list[str]]:
    """*now*'s label as *old* matched: unchanged when no field differs (its whole
    hash kept from before a field was named volatile, ``Memory.without``)."""
    differing = _differing(old, now)
    return (CHANGED, differing) if differing else (UNCHANGED, [])


def _differing(old: ItemPrint, now: ItemPrint) -> list[str]:
    names = set(old.fields) | set(now.fields)
    return sorted(name for name in names if old.fields.get(name) != now.fields.get(name))
