"""``rel=canonical`` checked against content. A page that names another page of the
site as its canonical one is an alias (its row kept, hashed ``alias:URL``, nothing
reported) only when its text is that page's as the state knows it; otherwise it is
a page of its own and reported as any other. When the canonical page is due in this
run and not fetched yet, its text is not known: the alias's result waits for the
run's end, written if the texts then agree, else dropped (the page is due again and
its next fetch reports it as a page of its own)."""

from __future__ import annotations

import logging
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)


class Verdict(Enum):
    ALIAS = "alias"  # its text is its canonical page's: kept, not reported
    WAIT = "wait"  # the canonical page is fetched later in this run
    OWN = "own"  # a page of its own: reported


class Aliases:
    """One crawl's aliases; the store's reads happen where the pipeline calls (on a
    shared state, the rows are loaded off the reactor's thread first)."""

    def __init__(self, store: StateStore, run_start: float, clock: Callable[[], float]) -> None:
        self.store = store
        self.run_start = run_start
        self.clock = clock
        #: Key of an alias's held result -> (its canonical URL, its fingerprint).
        self.waiting: dict[str, tuple[str, str]] = {}

    def judge(self, canonical_url: str, fingerprint: str) -> Verdict:
        try:
            canonical = self.store.get(canonical_url)
        except ValueError:
            return Verdict.OWN
        if canonical is None or canonical.gone:
            return Verdict.OWN  # not crawled: this page is the only copy reported
        if canonical.content_hash == fingerprint:
            return Verdict.ALIAS
        fetched = canonical.last_fetched is not None and canonical.last_fetched >= self.run_start
        if not fetched and canonical.next_check <= self.clock():
            return Verdict.WAIT  # its text may be about to move to this page's
        return Verdict.OWN

    def wait(self, key: str, canonical_url: str, fingerprint: str) -> None:
        self.waiting[key] = (canonical_url, fingerprint)

    def settle(self) -> tuple[list[str], int]:
        """At the run's end: the aliases that waited are written if their canonical
        page now has their text, else dropped. Returns (the keys written, how many
        dropped)."""
        written: list[str] = []
        dropped = 0
        for key, (url, fingerprint) in sorted(self.waiting.items()):
            if self.judge(url, fingerprint) is Verdict.ALIAS:
                self.store.deliver(key)
                written.append(key)
                continue
            self.store.discard(key)
            dropped += 1
            logger.info(
                "%s names %s as its canonical page, whose text is not its own: it is a "
                "page of its own, reported at its next fetch",
                key,
                url,
            )
        self.waiting.clear()
        return written, dropped
