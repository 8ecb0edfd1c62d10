"""``INCRECRAWL_MAX_TOKENS``: a run stops queuing page fetches before the Geonode
tokens it spends would pass the budget; the pages it did not queue stay due.

Tokens are counted as the API reported them for each answered page (its
``tokens_charged``), plus what the run spent before pages were queued (a map); a
fetch queued but not answered yet counts at the run's tokens per answered page so
far (one until something was answered: the documented charge of a plain extract).
With hybrid fetching a page may cost nothing (its probe answered): a page that does
not fit waits for the fetches under way rather than ending the queue.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat, stats

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class TokenBudget:
    def __init__(
        self, limit: int, crawler_stats: StatsCollector | None, free_answers: bool = False
    ) -> None:
        self.limit = limit  # 0: no budget
        self.free_answers = free_answers  # hybrid: an answered page may have cost nothing
        self.stats = crawler_stats
        self.start = self._charged()  # discovery (a map) may have spent some already
        self.queued = 0  # page fetches handed to Scrapy or to a batch job
        self.answered = 0  # of which an answer (or a failure) came back
        self.spent = 0  # tokens charged for the answered ones
        self.left = 0  # due pages not queued because of the budget

    def _charged(self) -> int:
        return int(self.stats.get_value(stats.API_TOKENS, 0)) if self.stats is not None else 0

    def per_page(self) -> float:
        return max(1.0, self.spent / self.answered) if self.answered else 1.0

    def take(self, pages: int) -> int:
        """How many of *pages* more fetches fit in the budget; they count as queued."""
        if not self.limit:
            self.queued += pages
            return pages
        cost = self.per_page()
        room = self.limit - self.start - self.spent - (self.queued - self.answered) * cost
        fits = max(0, min(pages, int(room // cost)))
        self.queued += fits
        return fits

    async def take_one(self) -> bool:
        """Whether one more page fits; in hybrid mode, once the fetches under way
        said what they cost, if it does not fit now."""
        while not self.take(1):
            if not (self.free_answers and self.queued > self.answered):
                return False
            await compat.sleep(0.05)
        return True

    def answer(self, pages: int = 1, tokens: int = 0) -> None:
        self.answered += pages
        self.spent += tokens

    def stop(self, left: int) -> None:
        """*left* due pages are not queued this run."""
        if not left:
            return
        if not self.left:
            logger.warning(
                "INCRECRAWL_MAX_TOKENS=%d reached (%d tokens charged, %d fetches under way): "
                "the remaining due pages stay due for the next run",
                self.limit,
                self._charged(),
                self.queued - self.answered,
            )
        self.left += left
        stats.inc(self.stats, stats.TOKENS_LEFT, left)
