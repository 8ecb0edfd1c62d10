"""New and gone items past the MAX_HELD a run keeps in memory for move detection
(``pages/moved.py``): memory is bounded, the verdicts are not given up.

An item sent on at once past the cap was delivered ``gone`` even when it had moved
to a page the run had not fetched yet (or never would: a bounded run), a deletion
that never was. Past the cap an item is not held in memory, but:

- a gone one passes the pipelines as moved (its page is recorded as it is now) and
  its print is held as an earlier run's would be (``pages/pending.py``): the run's
  release pairs it with its own new items (those held, and the prints of those
  delivered), delivers it ``gone`` if the run is complete, else keeps it in the
  state for a later run;
- a new one is delivered at once, and its print is kept so that its gone side, held
  or past the cap, on this run's pages or a later run's, is taken as moved.

Prints are small (a hash and short fields): up to ten times MAX_HELD of each are
kept past the cap a run, as many as the state takes a run (``HeldItems._write``).
Past that a gone item is still never delivered (counted in
``increcrawl/items/past_held_cap`` and said in the log: a deletion missed, never a
false one); a new one is delivered without its print. A new item past the cap whose
gone side was seen first is delivered ``new`` once, as a move across bounded runs is.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from increcrawl_scrapy import stats
from increcrawl_scrapy.pages.memory import GONE, MOVED
from increcrawl_scrapy.pages.pending import DELIVERED, Pending

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

    from increcrawl_scrapy.pages.page import PageItem

logger = logging.getLogger(__name__)


class PastTheCap:
    """One crawl's items past its in-memory cap."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.gone = 0  # gone items held as prints
        self.new = 0  # new items' prints kept
        self.lost = 0  # gone items past both caps: never delivered

    def take(
        self,
        member: PageItem,
        cap: int,
        held: list[Pending],
        print_of: Callable[[PageItem, str], Pending],
        delivered_new: set[str],
    ) -> None:
        """*member*, past the *cap*, sent on now: a gone one relabelled moved, its
        print added to *held*; a new one's print to *delivered_new* and *held*."""
        if member.label == GONE:
            if self.gone < cap:
                held.append(print_of(member, GONE))
                self.gone += 1
            else:
                self.lost += 1
                stats.inc(self.crawler.stats, stats.ITEMS_PAST_HELD_CAP)
            member.label, member.moved = MOVED, True
        elif self.new < cap:
            delivered_new.add(member.whole)
            held.append(print_of(member, DELIVERED))
            self.new += 1

    def said(self, cap: int) -> None:
        """At the close: the gone items not held at all, if any (counted as they came)."""
        if self.lost:
            logger.warning(
                "%d gone items past the %d held a run were not held: never delivered gone",
                self.lost,
                cap,
            )
