"""Items that moved from one page to another: a listing's pages shift by one place
when an item is added at its top (or removed), and each page's last item becomes
the next page's first. It is the same item: it is not delivered again.

Items without a URL field are matched within their page first (``pages/memory.py``);
what is left there, the page's new items and its gone ones, is held until the
crawl is idle (every page of the run answered). Then a gone item and a new item of
another page that are identical (every field, less the volatile ones) are one item
that moved: the gone one is not delivered and the new one is unchanged (counted in
``increcrawl/items/moved``). A page without a previous version (a new one, or the
first run's) is not held up: its items are delivered ``new`` at once (its result
recorded, so a second request for it is skipped), and a gone item identical to one
of them moved there. The rest are delivered then, through one ``data:``
request whose response ``PageItemsMiddleware`` answers with them, so they pass the
rest of the spider middlewares and every pipeline as any item. At most MAX_HELD
items are held (past that they go on at once).

Every close delivers them too (``CLOSESPIDER_PAGECOUNT``, ``_ITEMCOUNT``,
``_TIMEOUT``, a shutdown: a bounded run never comes to be idle). A closing engine
sends no more requests but still scrapes those in progress: the first of their
responses to pass ``PageItemsMiddleware`` once the crawl is closing takes every
item held, paired as above, with its own items, and each later one its own; so
they pass the same spider middlewares and pipelines. Scrapy tells no component
that a close began before it closes the pipelines, and a close may find no
response left to come (a timeout while the next request waits for its download
delay, or is answered 304): then nothing can carry them. Their pages' results stay
unwritten, due, and their memories are written as the items delivered left them
(``HeldItems.hold_over``), marked: the next fetch of such a page, in whatever run,
bounded or not, delivers its new and gone items at once, without waiting for the
run's other pages (so an item that moved meanwhile is ``gone`` and ``new``). The
run summary counts those pages in the run that writes their results, and says how
many items were held over (``increcrawl/items/held_over``). Holding less instead
(never in a bounded run, or a few pages at a time) would report every item of a
shifted listing as ``gone`` and ``new`` in the runs that large sites are crawled by,
and still could not deliver the items of a close with nothing in progress.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider

from increcrawl_scrapy import stats
from increcrawl_scrapy.pages.memory import ARRIVED, GONE, MOVED, NEW, Memory, unpack

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.pages.page import Page, PageItem
    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

MAX_HELD = 10_000
#: The meta key of the request whose response releases the held items.
RELEASE = "increcrawl_release_held"


class HeldItems:
    """One crawl's held new and gone items, owned by its ``PageItemsMiddleware`` (no
    registry by crawler: one kept every finished crawler alive)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.items: list[tuple[Any, PageItem]] = []
        self.delivered_new: set[str] = set()  # prints of new pages' items, delivered
        crawler.signals.connect(self.idle, signal=signals.spider_idle)  # its middleware holds it

    def hold(self, item: Any, member: PageItem) -> bool:
        """Keep *item* until the crawl is idle or closing; False if too many already
        are, or its page's items were held over by a run before."""
        if member.label not in (NEW, GONE) or len(self.items) >= MAX_HELD:
            return False
        # A new page's item, or one held over: delivered now.
        if not member.group.matched or member.group.held_over:
            if len(self.delivered_new) < MAX_HELD:
                self.delivered_new.add(member.whole)
            return False
        self.items.append((item, member))
        return True

    def idle(self) -> None:
        if not self.items or self.crawler.engine is None:
            return
        request = Request(
            "data:,",
            callback=_released,
            dont_filter=True,  # offsite and the duplicate filter let it through
            meta={
                RELEASE: True,
                "dont_obey_robotstxt": True,
                "geonode": False,  # not through the API
                "increcrawl_always": True,  # never skipped
                "dont_cache": True,
            },
        )
        self.crawler.engine.crawl(request)
        raise DontCloseSpider

    def release(self) -> list[tuple[Any, PageItem]]:
        """The held items with their pages' members, a gone and a new one of another
        page that are identical relabelled (``MOVED`` and ``ARRIVED``)."""
        held, self.items = self.items, []
        new: dict[str, list[PageItem]] = defaultdict(list)
        for _, member in held:
            if member.label == NEW:
                new[member.whole].append(member)
        moved = 0
        for _, member in held:
            if member.label != GONE:
                continue
            partners = new.get(member.whole, [])
            partner = next((m for m in partners if m.group is not member.group), None)
            if partner is not None:
                partners.remove(partner)
                partner.label, partner.moved = ARRIVED, True
            elif member.whole not in self.delivered_new:
                continue
            member.label, member.moved = MOVED, True
            moved += 1
        stats.inc(self.crawler.stats, stats.ITEMS_MOVED, moved)
        return held

    def hold_over(self, store: StateStore) -> None:
        """At the close, once every item in progress went through the pipelines:
        the items still held, which no response carried. Each of their pages keeps
        its result unwritten (due), and its memory is written as the items delivered
        left it (the new ones held out, the gone ones back in), marked held: its
        next fetch delivers the rest at once. A page is counted in the run summary
        by the run that writes its result."""
        left, self.items = self.items, []
        pages: dict[int, tuple[Page, list[PageItem]]] = {}
        for _, member in left:
            pages.setdefault(id(member.group), (member.group, []))[1].append(member)
        for page, members in pages.values():
            memory = unpack(page.memory)
            try:
                key = store.normalize(page.url)
            except ValueError:
                continue
            if memory is None:
                continue
            prints = list(memory.items)
            for member in members:
                if member.label == GONE and member.old is not None:
                    prints.append(member.old)
                elif member.label == NEW:
                    index = next((i for i, p in enumerate(prints) if p.whole == member.whole), None)
                    if index is not None:
                        del prints[index]
            body = Memory(prints, memory.requests, own=memory.own, held=True).pack()
            recorded = page.recorded
            if not store.keep_memory(key, body, recorded=recorded is not None):
                continue  # written already, or given up (an item a later pipeline lost)
            if recorded is not None:  # counted when recorded; its result is not written
                stats.inc(self.crawler.stats, stats.BY_CHANGE[recorded.outcome.change], -1)
                if recorded.never_found:
                    stats.inc(self.crawler.stats, stats.NEVER_FOUND, -1)
        if left:
            stats.inc(self.crawler.stats, stats.ITEMS_HELD_OVER, len(left))
            logger.info(
                "%d new and gone items of %d pages were held for move detection when the "
                "crawl closed, no response left to carry them: held over, their pages "
                "stay due and their next fetch delivers them at once",
                len(left),
                len(pages),
            )


def _released(response: Response) -> list[Any]:
    return []  # PageItemsMiddleware answers this response with the held items
