"""``INCRECRAWL_MAX_TOKENS``: a run stops queuing page fetches before the Geonode
tokens it spends would pass the budget; the pages it did not queue stay due.
With hybrid fetching a page may cost nothing (its probe answered): a page that does
not fit waits for the fetches under way rather than ending the queue.
``INCRECRAWL_MONTHLY_TOKENS`` sets the same limit from the run's share of the plan
month (``token_plan.py``), the lower of the two when both are set.

Tokens are counted as the API reported them for each answered page (its
``tokens_charged``), plus what the run spent before pages were queued (a map); a
fetch queued but not answered yet counts at the run's tokens per answered page so
far (one until something was answered: the documented charge of a plain extract).
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.schedule.token_plan import MonthShare

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.state import StateStore

MAX_TOKENS, MONTHLY_TOKENS = "INCRECRAWL_MAX_TOKENS", "INCRECRAWL_MONTHLY_TOKENS"

logger = logging.getLogger(__name__)


class TokenBudget:
    def __init__(
        self,
        limit: int | None,
        crawler_stats: StatsCollector | None,
        by: str = MAX_TOKENS,
        free_answers: bool = False,
    ) -> None:
        self.limit = limit  # None: no budget
        self.by = by  # the setting the limit comes from
        self.free_answers = free_answers  # hybrid: an answered page may have cost nothing
        self.stats = crawler_stats
        self.start = self._charged()  # discovery (a map) may have spent some already
        self.queued = 0  # page fetches handed to Scrapy or to a batch job
        self.answered = 0  # of which an answer (or a failure) came back
        self.spent = 0  # tokens charged for the answered ones
        self.left = 0  # due pages not queued because of the budget

    def _charged(self) -> int:
        return int(self.stats.get_value(stats.API_TOKENS, 0)) if self.stats is not None else 0

    @classmethod
    def for_run(
        cls,
        config: IncrecrawlConfig,
        share: MonthShare | None,
        crawler_stats: StatsCollector,
        free_answers: bool = False,
    ) -> TokenBudget:
        """The lower of INCRECRAWL_MAX_TOKENS and the month's share."""
        if share is not None and (not config.max_tokens or share.share < config.max_tokens):
            return cls(share.share, crawler_stats, MONTHLY_TOKENS, free_answers)
        return cls(config.max_tokens or None, crawler_stats, MAX_TOKENS, free_answers)

    def per_page(self) -> float:
        return max(1.0, self.spent / self.answered) if self.answered else 1.0

    def take(self, pages: int) -> int:
        """How many of *pages* more fetches fit in the budget; they count as queued."""
        if self.limit is None:
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
                "%s=%d reached (%d tokens charged, %d fetches under way): "
                "the remaining due pages stay due for the next run",
                self.by if self.by == MAX_TOKENS else "The share of " + self.by,
                self.limit,
                self._charged(),
                self.queued - self.answered,
            )
        self.left += left
        key = stats.TOKENS_LEFT if self.by == MAX_TOKENS else stats.MONTH_LEFT
        stats.inc(self.stats, key, left)


async def month_share(
    store: StateStore, config: IncrecrawlConfig, crawler_stats: StatsCollector
) -> MonthShare | None:
    """This run's share of INCRECRAWL_MONTHLY_TOKENS (None without one), logged and
    kept in the stats."""
    if not config.monthly_tokens:
        return None
    share = await compat.in_thread(
        store.month_share, store.clock(), config.tokens_reset_day, config.monthly_tokens
    )
    logger.info(
        "%s=%d: %d tokens left until the reset on %s, runs every %.1f h: this run may spend %d",
        MONTHLY_TOKENS,
        share.budget,
        share.left,
        datetime.fromtimestamp(share.end, timezone.utc).strftime("%Y-%m-%d"),
        share.interval / 3600,
        share.share,
    )
    crawler_stats.set_value(stats.MONTH_SHARE, share.share)
    crawler_stats.set_value(stats.MONTH_TOKENS_LEFT, share.left)
    return share
