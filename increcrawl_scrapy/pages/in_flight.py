"""The one registry of a crawl's items in flight, each with its page's member
(``pages/page.py``): from ``PageItemsMiddleware`` to the pipeline (on their way),
then, once the pipeline handed one on holding rows to write, until Scrapy's signal
says it was delivered or lost (``crawl/delivery.py`` writes the rows). An item alone
(the ``incremental`` spider's: ``page.item_alone``) joins it at the pipeline.

An item is found again by what it is, never by the object's identity alone: a
pipeline before ours may hand on a copy (``dict(item)``, ``asdict``) or stamp a
field, and one after ours may do the same. So, in order: the object itself; then,
on its way, a copy by its print, else the next of the page its URL field names;
once handed on, a copy by the labels the pipeline stamped, else (a substitute
without our labels) the next held of the response Scrapy's signal names, of its
page if it says. Each leaves once it reached the pipeline without rows to write,
was delivered, or was dropped: nothing stays for the rest of the crawl."""

from __future__ import annotations

import weakref
from collections import deque
from typing import Any

from itemadapter import ItemAdapter

from increcrawl_scrapy.pages.memory import GONE, UNCHANGED, item_whole
from increcrawl_scrapy.pages.page import PageItem


class InFlight:
    def __init__(self, url_field: str, skip: tuple[str, ...] | frozenset[str]) -> None:
        self.url_field = url_field
        self.skip = skip
        self._count = 0  # on their way
        #: On their way, by the object (its id: a member keeps the object alive),
        #: by its print and by its page URL (a copy is found without a scan).
        self._by_object: dict[int, list[PageItem]] = {}
        self._by_print: dict[str, list[PageItem]] = {}
        self._by_url: dict[str, list[PageItem]] = {}
        #: Handed on by the pipeline with rows to write, their signals not come yet.
        self._handed: deque[PageItem] = deque()

    def expect(self, members: list[PageItem], response: Any = None) -> None:
        """*members* are on their way, yielded with *response*, in that order."""
        for member in members:
            if response is not None:
                member.via = weakref.ref(response)
            if not member.seen_as:  # what a copy of the object looks like
                own = member.whole and member.label != GONE  # a gone one's is its old print
                member.seen_as = member.whole if own else item_whole(member.item, self.skip)
            self._by_object.setdefault(id(member.item), []).append(member)
            self._by_print.setdefault(member.seen_as, []).append(member)
            self._by_url.setdefault(member.group.url, []).append(member)
            self._count += 1

    def __len__(self) -> int:
        return self._count

    def take(self, item: Any) -> PageItem | None:
        """The member *item* is (the object yielded, a copy of it, or, by its URL
        field, the next of its page's), taken off the way; None: not a page's item."""
        if not self._count:
            return None
        member = self._same_object(item)
        if member is None and ItemAdapter.is_item(item):
            same = self._by_print.get(item_whole(item, self.skip))
            url = ItemAdapter(item).get(self.url_field)
            if same:
                member = same[0]
            elif isinstance(url, str) and self._by_url.get(url):
                member = self._by_url[url][0]
        if member is not None:
            self._off_the_way(member)
        return member

    def dropped(self, item: Any, response: Any = None) -> PageItem | None:
        """The member of *item*, as yielded with *response* (Scrapy's signal names
        both), that a pipeline before ours dropped."""
        member = self._same_object(item, response)
        if member is not None:
            self._off_the_way(member)
        return member

    def hand_on(self, member: PageItem, item: Any, row: str) -> None:
        """The pipeline handed *item* on: *row* is written once it is delivered."""
        member.handed_on = item
        member.rows.append(row)
        if len(member.rows) == 1:
            self._handed.append(member)

    def delivered(self, item: Any, response: Any = None) -> PageItem | None:
        """The handed-on member *item* is (Scrapy's signal, with *response*), taken
        off: the object, else the member its labels name (a later pipeline's copy),
        else (another object, without our labels) the next of *response*'s."""
        found = next((m for m in self._handed if item is m.handed_on or item is m.item), None)
        adapter = ItemAdapter(item) if ItemAdapter.is_item(item) else None
        if found is None and adapter is not None:
            found = next((m for m in self._handed if _labelled(m, adapter)), None)
        # A labelled item found nothing: it is none of those held (an unchanged one,
        # INCRECRAWL_EXPORT = "all"), and must not let its page be written early.
        unlabelled = adapter is None or adapter.get("change") is None
        if found is None and response is not None and unlabelled:
            came = [member for member in self._handed if _came_with(member, response)]
            url = adapter.get(self.url_field) if adapter is not None else None
            found = next((m for m in came if m.group.url == url), came[0] if came else None)
        if found is not None:
            self._handed.remove(found)
        return found

    def _same_object(self, item: Any, response: Any = None) -> PageItem | None:
        """The member on its way that is *item* itself (of *response*'s first)."""
        same = [member for member in self._by_object.get(id(item), ()) if member.item is item]
        mine = [member for member in same if _came_with(member, response)]
        return next(iter(mine or same), None)

    def _off_the_way(self, member: PageItem) -> None:
        self._count -= 1
        _unlist(self._by_object, id(member.item), member)
        _unlist(self._by_print, member.seen_as, member)
        _unlist(self._by_url, member.group.url, member)


def _unlist(index: dict[Any, list[PageItem]], key: Any, member: PageItem) -> None:
    others = index[key]
    others.remove(member)
    if not others:
        del index[key]


def _came_with(member: PageItem, response: Any) -> bool:
    return response is not None and member.via is not None and member.via() is response


def _labelled(member: PageItem, adapter: ItemAdapter) -> bool:
    """Whether *adapter*'s labels (a later pipeline's copy) name *member*'s rows."""
    key = adapter.get("normalized_url")
    if not key or adapter.get("change") in (None, UNCHANGED):
        return False
    return any(row == key or row.startswith(f"{key}#item:") for row in member.rows)
