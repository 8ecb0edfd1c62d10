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

A run closed before it is idle (``CLOSESPIDER_PAGECOUNT``, ``_ITEMCOUNT``,
``_TIMEOUT``, a shutdown: a bounded run never comes to be idle) did not see every
page: an item missing from one of its pages may be on one it did not fetch, an item
new on one may have come from there. A closing engine sends no more requests but
still scrapes those in progress: the first of their responses to pass
``PageItemsMiddleware`` once the crawl is closing pairs every item held, as above,
with the items earlier runs held. A new item it cannot pair is delivered, whole,
its print kept; a gone one is held for a later run (``pages/pending.py``: in the
state), and passes the pipelines as moved, so that its page is recorded as it is
now. A close with no response left to come (a timeout while the next request waits
for its download delay, or is answered 304) holds them for a later run the same way
(``HeldItems.hold_over``; a new one whole). A later run pairs them with its own (a
gone one and a print of a new one delivered: moved), and delivers the rest once it
is complete (idle, and every page it asked answered usably: ``pages/answers.py``;
decided as it goes idle, carried by the release request) or, bounded, once every
page due when they were held was fetched since (``pending.py``: HELD_FOR at most). A
memory kept by an earlier version with its items "held" (``held``) has its page's
next fetch deliver them at once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.answers import Answers
from increcrawl_scrapy.pages.memory import ARRIVED, GONE, MOVED, NEW, ItemPrint, item_print
from increcrawl_scrapy.pages.page import Page, PageItem
from increcrawl_scrapy.pages.pending import (
    DELIVERED,
    HELD_FOR,
    Pending,
    held_row,
    kept,
    rebuilt,
    site_of,
)
from increcrawl_scrapy.pages.pending import pack as pack_pending
from increcrawl_scrapy.pages.pending import unpack as unpack_pending
from increcrawl_scrapy.pages.released import ReleasedItems
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

MAX_HELD = 10_000
#: The meta key of the request whose response releases the held items.
RELEASE = "increcrawl_release_held"
#: ...and whether the run was complete when it went idle (decided then: the release
#: request, or the items it releases, may be what ``CLOSESPIDER_*`` counts last).
COMPLETE = "increcrawl_release_complete"


class HeldItems:
    """One crawl's held new and gone items, owned by its ``PageItemsMiddleware`` (no
    registry by crawler: one kept every finished crawler alive), and the items
    earlier runs held for a later one (``pages/pending.py``)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.items: list[tuple[Any, PageItem]] = []
        #: Prints of new pages' items, delivered, and keys seen (``keyed.py``).
        self.delivered_new: set[str] = set()
        #: Held for a later run: read when the crawl opens (every site's), those of
        #: the sites this run crawled released, and written, each its own row.
        self.pending: list[Pending] = []
        self.sites: set[str] = set()  # the sites that answered this run (site_of)
        self._held_sites: set[str] = set()  # the sites of those read
        self._released: set[str] = set()  # the rows of earlier ones released
        #: Earlier ones handed to the pipelines: their rows deleted once delivered.
        self.released = ReleasedItems(crawler)
        self._looked = False  # paired by a release this run
        self._idle = False  # complete: it saw every page (a bounded run never does)
        self.answers = Answers(crawler, ignored=RELEASE)  # the pages that failed
        #: The times items were held whose pages due then were all fetched since.
        self._covered: set[float] = set()
        self.clock = config_for(crawler).clock
        #: Keys new to their page (``keyed.py``): a later run's gone one moved here.
        self.arrived: list[PageItem] = []
        self.skip = config_for(crawler).volatile_fields
        crawler.signals.connect(self.idle, signal=signals.spider_idle)  # its middleware holds it
        crawler.signals.connect(self._read_pending, signal=signals.spider_opened)
        # Downloaded: a 304 a downloader middleware answers is never "received".
        crawler.signals.connect(self._answered, signal=signals.response_downloaded)
        crawler.signals.connect(self._answered, signal=signals.response_received)
        crawler.signals.connect(self._started, signal=signals.request_scheduled)

    async def _read_pending(self) -> None:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return
        store = state.store
        rows = await compat.in_thread(store.held_items) if store.shared else store.held_items()
        self.pending = [pending for entry, body in rows for pending in unpack_pending(body, entry)]
        self._held_sites = {pending.site for pending in self.pending}
        await self._read_coverage(store, state.seed)

    async def _read_coverage(self, store: StateStore, seed: str) -> None:
        """The times items were held by which the slices went round (as the run
        opens: what this run fetches counts for the next one)."""
        now = self.clock()
        for pending in self.pending:  # one an earlier version held: from now on
            pending.held_at = pending.held_at or now
            pending.first_held = pending.first_held or pending.held_at
        times = {pending.held_at for pending in self.pending}
        if not times:
            return
        if store.shared:
            self._covered = await compat.in_thread(store.covered_since, seed, times)
        else:
            self._covered = store.covered_since(seed, times)

    def _due(self, pending: Pending) -> bool:
        """Whether a bounded run delivers *pending*: every page due when it was held
        was fetched since (the slices went round), or it was held HELD_FOR. Never
        one this run held (``runs`` -1: a release before, as the crawl closes)."""
        if pending.runs < 0:
            return False
        return pending.held_at in self._covered or self.clock() - pending.first_held >= HELD_FOR

    def _answered(self, response: Response, request: Request, **_: Any) -> None:
        self.sites.update(filter(None, (site_of(response.url), site_of(request.url))))

    def _started(self, request: Request, **_: Any) -> None:
        """A start request's site is the run's, answered or not: a run with nothing
        due skips every page (``skip_not_due.py``), and it saw them as they were."""
        if request.meta.get("is_start_request") and (site := site_of(request.url)):
            self.sites.add(site)

    def _ours(self) -> list[Pending]:
        """The items earlier runs held of the sites this run crawled (its start
        requests', those it got a response of): a project spider's seed is its
        name, and its run on another site (``-a start_url=...``) must neither
        deliver nor pair them."""
        return [p for p in self.pending if p.entry is None or p.site in self.sites]

    def hold(self, item: Any, member: PageItem) -> bool:
        """Keep *item* until the crawl is idle or closing; False if too many already
        are, or its page's items were held over by a run before."""
        if member.item_key is not None:  # a key seen: one gone from elsewhere moved here
            if len(self.delivered_new) < MAX_HELD:
                self.delivered_new.add(member.whole)
            if member.whole in member.group.arrived and len(self.arrived) < MAX_HELD:
                self.arrived.append(member)  # kept for a later run unless this one is idle
            return False
        if member.label not in (NEW, GONE) or len(self.items) >= MAX_HELD:
            return False
        # A new page's item, or one held over: delivered now.
        if not member.group.matched or member.group.held_over:
            if len(self.delivered_new) < MAX_HELD:
                self.delivered_new.add(member.whole)
            return False
        self.items.append((item, member))
        return True

    def to_release(self) -> bool:
        """Whether a release has something to pair: items held, or an earlier run's."""
        return bool(self.items) or (not self._looked and bool(self._held_sites & self.sites))

    def idle(self) -> None:
        # Idle, and every page it asked answered usably: it saw every page it reaches.
        # An engine closing (CLOSESPIDER_*, a shutdown) goes idle too: not so, but a
        # close its own release request caused leaves the run as it was.
        if compat.engine_closing(self.crawler):
            return
        if compat.busy_besides(self.crawler):
            return  # another idle handler fed the crawl: the next idle, once it answered
        self._idle = self.answers.complete()
        if not self._idle and self.to_release():
            logger.info(
                "Idle, but %d pages asked did not answer usably (%s): items held for "
                "move detection stay held",
                len(self.answers.waiting) + len(self.answers.failed),
                ", ".join(self.answers.not_answered()[:3]),
            )
        if not self.to_release() or self.crawler.engine is None:
            return
        request = Request(
            "data:,",
            callback=_released,
            dont_filter=True,  # offsite and the duplicate filter let it through
            meta={
                RELEASE: True,
                COMPLETE: self._idle,
                "dont_obey_robotstxt": True,
                "geonode": False,  # not through the API
                "increcrawl_always": True,  # never skipped
                "dont_cache": True,
            },
        )
        self.crawler.engine.crawl(request)
        raise DontCloseSpider

    def release(self, complete: bool) -> list[tuple[Any, PageItem]]:
        """The held items with their pages' members, and an earlier run's, paired:
        a gone and a new one of another page that are identical relabelled
        (``MOVED`` and ``ARRIVED``), a gone one identical to a new one an earlier
        run delivered ``MOVED``. The new ones left are delivered now, whole (the
        object the spider yielded); the gone ones when the run is *complete* (idle,
        every page it asked answered usably), or an earlier run's once the slices
        went round since it was held (``_due``); else
        held for a later run (``pages/pending.py``), as is the print of a new one
        delivered by a run that is not: an item of this run's pages held then
        passes as moved, so its page is recorded."""
        self._looked = True
        held, self.items = self.items, []
        # Other sites' rows stay as they are in the state, for their own runs.
        ours, self.pending = self._ours(), []
        self._released |= {p.entry for p in ours if p.entry is not None}  # a run may release twice
        new_before = [p for p in ours if p.label == DELIVERED]
        earlier = [_earlier(pending) for pending in ours if pending.label != DELIVERED]
        everything = held + [(member.item, member) for _, member in earlier]
        new: dict[str, list[PageItem]] = defaultdict(list)
        for _, member in everything:
            if member.label == NEW:
                new[member.whole].append(member)
        moved = 0
        for _, member in everything:
            if member.label != GONE:
                continue
            partners = new.get(member.whole, [])
            partner = next((m for m in partners if m.group is not member.group), None)
            if partner is not None:
                partners.remove(partner)
                partner.label, partner.moved = ARRIVED, True
            elif (delivered := _delivered_new(member, new_before)) is not None:
                new_before.remove(delivered)  # its new side, delivered by an earlier run
            elif member.whole not in self.delivered_new:
                continue
            member.label, member.moved = MOVED, True
            moved += 1
        stats.inc(self.crawler.stats, stats.ITEMS_MOVED, moved)
        earlier_of = {id(member): pending for pending, member in earlier}
        out = []
        for item, member in everything:
            before = earlier_of.get(id(member))
            of_earlier = before is not None
            if member.label in (MOVED, ARRIVED):
                if not of_earlier:  # its page waits for it, or counts it unchanged
                    out.append((item, member))
            elif member.label == NEW:  # whole, now: the state keeps no more than a print
                out.append((item, member))
                if not complete:  # its gone side may be on a page a later run fetches
                    self.pending.append(self._pending(member, -1, DELIVERED))
            elif complete or (before is not None and self._due(before)):
                out.append((item, member))
            else:
                self.pending.append(self._pending(member, -1, before=before))
                if not of_earlier:  # its page is recorded without it
                    member.label, member.moved = MOVED, True
                    out.append((item, member))
        if not complete:  # an idle run saw every page: a gone one would have come
            self.pending += [p for p in new_before if not self._due(p)]
        # An earlier one delivered leaves the state once it passed every pipeline.
        entries = {id(member): pending.entry for pending, member in earlier}
        self.released.expect({id(item): e for item, m in out if (e := entries.get(id(m)))})
        return out

    def _pending(
        self, member: PageItem, runs: int, label: str = "", before: Pending | None = None
    ) -> Pending:
        group = member.group
        if label == DELIVERED:  # to pair a gone one: its hash (a key's, with a key)
            return Pending(label, group.url, group.key, ItemPrint(member.whole, {}, {}), runs)
        old = member.old if member.old is not None else item_print(member.item, self.skip)
        if before is not None:  # held again: since the time it was first held
            again = Pending(member.label, group.url, group.key, old, before.runs)
            again.held_at, again.first_held = before.held_at, before.first_held
            again.entry = before.entry  # its row: written back whatever the cap
            return again
        return Pending(member.label, group.url, group.key, old, runs)

    def hold_over(self, store: StateStore) -> None:
        """At the close, once every item in progress went through the pipelines:
        the items still held, which no response carried, held for a later run
        (``pages/pending.py``): a new one whole (its class, every field), since no
        pipeline takes it any more. Each of their pages is written as it is now: its
        result, if its other items were delivered (recorded with its memory), else
        its memory alone (its result unwritten, due), so its next fetch does not
        find them again. Then the items held for a later run are written, each
        counting one run more."""
        left, self.items = self.items, []
        pages: dict[int, tuple[Page, list[PageItem]]] = {}
        for _, member in left:
            pages.setdefault(id(member.group), (member.group, []))[1].append(member)
            self.pending.append(self._pending(member, -1))
            if member.label == NEW:
                self.pending[-1].item = kept(member.item)
        for page, _ in pages.values():
            try:
                key = page.key or store.normalize(page.url)
            except ValueError:
                continue
            if page.memory is None:
                continue
            if page.recorded is not None:  # unless given up (an item a pipeline lost)
                store.deliver(key)
            else:
                store.keep_memory(key, page.memory, recorded=False)
        if left:
            logger.info(
                "%d new and gone items of %d pages were held for move detection when the "
                "crawl closed, no response left to carry them: held for a later run",
                len(left),
                len(pages),
            )
        self._write(store)

    def _write(self, store: StateStore) -> None:
        """The items held for a later run, into the state: each a row of its own,
        under its page's (``held_item_key``); the rows of those released and
        not held again deleted, but those on their way (deleted once delivered).
        A crawl writes only its own: another's at the same time keeps its own."""
        if not self._idle:  # keys new to their page may have come from one not seen
            self.pending += [self._pending(m, -1, DELIVERED) for m in self.arrived]
        if not self._looked:  # none released: this run's sites' held one run more
            self.pending = self._ours()
        # Earlier runs' rows are in the state: written back, never dropped. At most
        # MAX_HELD more a run, gone items before prints; past that not held (said).
        self.pending.sort(key=lambda p: (p.entry is None, p.label == DELIVERED))
        over = self.pending[sum(p.entry is not None for p in self.pending) + MAX_HELD :]
        not_held = [p for p in over if p.label != DELIVERED]
        # The prints of new items delivered are not counted held.
        fresh = sum(1 for p in self.pending if p.runs < 0 and p.label != DELIVERED)
        stats.inc(self.crawler.stats, stats.ITEMS_HELD_OVER, fresh - len(not_held))
        if over:
            stats.inc(self.crawler.stats, stats.ITEMS_PAST_HELD_CAP, len(over))
            logger.warning(
                "%d items past the %d a run holds for a later one are not held (%d gone "
                "or new: a gone one is never delivered; prints of new ones delivered: "
                "one that moved may be delivered gone too)",
                len(over), MAX_HELD, len(not_held),
            )  # fmt: skip
        written: set[str] = set()
        now = self.clock()
        failed = not self.answers.complete()  # a page not seen: the round starts again
        try:
            for pending in self.pending[: len(self.pending) - len(over)]:
                pending.runs += 1
                if failed or not pending.runs:  # held now (this run's: -1 before)
                    pending.held_at = now
                pending.first_held = pending.first_held or now  # HELD_FOR's start
                entry = pending.entry or held_row(store, pending, written)
                written.add(entry)
                store.keep_held_item(entry, pack_pending([pending]))
            on_their_way = self.released.on_their_way()
            for entry in self._released - written - on_their_way:
                store.drop_held_item(entry)
        except StateLockedError:
            return


def _delivered_new(member: PageItem, delivered: list[Pending]) -> Pending | None:
    """Of the new items earlier runs *delivered*, the one gone *member* moved to: the
    same print (a declared key's: the same key) on another page."""
    page = (member.group.url, member.group.key)
    return next(
        (p for p in delivered if p.old.whole == member.whole and (p.url, p.key) != page), None
    )


def _earlier(pending: Pending) -> tuple[Pending, PageItem]:
    """An item an earlier run held, as a member of a page of its own that this run
    does not record (``Page.earlier``): delivered with the fields kept of it."""
    page = Page(url=pending.url, size=1, text="", key=pending.key, matched=True)
    page.earlier = True
    member = PageItem(page, None, label=pending.label, whole=pending.old.whole, old=pending.old)
    # A gone item is the fields that identify it; a new one was kept whole.
    member.item = dict(pending.old.values) if pending.item is None else rebuilt(pending.item)
    page.members = [member]
    return pending, member


def _released(response: Response) -> list[Any]:
    return []  # PageItemsMiddleware answers this response with the held items
