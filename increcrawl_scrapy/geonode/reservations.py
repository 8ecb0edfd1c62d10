"""What the crawl's API calls may spend, in the state before they are sent.

Tokens charged are written with each batch of results, so a run killed (SIGKILL,
OOM, a cancelled Scrapyd job) between two batches spent tokens the state never
heard of. Before a call that may spend tokens is sent (``POST /v1/extract``,
``POST /v1/batch``) its reservation is taken from a block written to the run's row
(``runs.tokens_charged``, only ever raised while the run lasts); the call's answer
settles it (the tokens it charged are counted in the crawl's stats). One write
reserves the block for the calls of several pages: a killed run counts the calls it
had in flight and what was left of its block, at most ``RESERVE_AHEAD`` tokens more
than its calls could have spent. A run that ends writes what was charged, plus the
reservations nothing settled (a batch job cancelled before its results were read:
what it spent is not known).
"""

from __future__ import annotations

import asyncio
import math
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat

if TYPE_CHECKING:
    from collections.abc import Callable

#: The tokens reserved beyond the calls that needed a new block: a killed run
#: counts at most this many more than its calls in flight could have spent.
RESERVE_AHEAD = 20


class Reservations:
    """*write* makes a ceiling durable (blocking: run in a thread); *charged* is
    what the API said the crawl's answered calls cost."""

    def __init__(self, write: Callable[[int], None], charged: Callable[[], int]) -> None:
        self._write = write
        self._charged = charged
        self.ceiling = 0  # in the state: never less than charged + open reservations
        self.open = 0  # reserved for calls sent and not settled
        self.per_page = 1  # the documented charge of a plain extract, or the most seen
        self._lock = asyncio.Lock()

    async def reserve(self, pages: int) -> int:
        """Reserve what fetching *pages* may cost, written before this returns;
        the tokens reserved, to :meth:`settle` once the call answered."""
        tokens = pages * self.per_page
        async with self._lock:  # one write at a time; the calls behind it use its block
            needed = self._charged() + self.open + tokens
            if needed > self.ceiling:
                ceiling = needed + RESERVE_AHEAD
                await compat.in_thread(self._write, ceiling)
                self.ceiling = ceiling
            self.open += tokens
        return tokens

    def settle(self, reserved: int, pages: int = 0, charged: int = 0) -> None:
        """The call reserved for answered; it charged *charged* for *pages* (counted
        in the crawl's stats already): later calls reserve what one page cost."""
        self.open -= reserved
        if pages and charged:
            self.per_page = max(self.per_page, math.ceil(charged / pages))

    def unsettled(self) -> int:
        """Tokens reserved for calls no answer settled (counted as spent)."""
        return self.open
