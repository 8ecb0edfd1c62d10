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
items are held (past that they go on at once); a crawl closed before it is idle
delivers none of them, and their pages' results stay unwritten: due next run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider

from increcrawl_scrapy import stats
from increcrawl_scrapy.pages.memory import ARRIVED, GONE, MOVED, NEW

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.pages.page import PageItem

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
        """Keep *item* until the crawl is idle; False if too many already are."""
        if member.label not in (NEW, GONE) or len(self.items) >= MAX_HELD:
            return False
        if not member.group.matched:  # a new page's item: delivered now
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


def _released(response: Response) -> list[Any]:
    return []  # PageItemsMiddleware answers this response with the held items
