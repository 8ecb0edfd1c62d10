"""The rows a run fetches: the due set, likeliest changes first, cut to
``INCRECRAWL_MAX_FETCHES`` or to what a month's share of tokens pays for (the rest
wait for a later run, and the longest wait is reported)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.schedule.token_plan import MonthShare
    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)


async def due_rows(
    crawler: Crawler,
    store: StateStore,
    seed: str,
    chunk: int,
    share: MonthShare | None,
    free_answers: bool,
) -> tuple[int, Iterator[list[PageState]]]:
    """How many rows this run fetches, and the rows in chunks of *chunk* (read lazily). A
    month's *share* limits pages at a token each, less what discovery spent; not
    when a page may cost nothing (*free_answers*: hybrid fetching's probes; the token
    budget stops the extractions instead)."""
    config = config_for(crawler)
    limit, name = config.max_fetches or None, "INCRECRAWL_MAX_FETCHES"
    key = stats.BUDGET_LEFT
    if share is not None and not free_answers:
        # At least one: no limit would be none at all (the token budget stops it).
        pages = max(1, share.share - int(crawler.stats.get_value(stats.API_TOKENS, 0)))
        if limit is None or pages < limit:
            limit, name, key = pages, "The share of INCRECRAWL_MONTHLY_TOKENS", stats.MONTH_LEFT
    budget = await compat.in_thread(store.budget, seed, limit)
    if budget.left:
        logger.warning(
            "%s=%d: %d of %d due pages fetched, %d wait for a later "
            "run (the longest has been due %.1f h)",
            name,
            limit,
            budget.due - budget.left,
            budget.due,
            budget.left,
            budget.longest_wait / 3600,
        )
        stats.inc(crawler.stats, key, budget.left)
        crawler.stats.set_value(stats.BUDGET_LONGEST_WAIT, round(budget.longest_wait))
    chunks = store.due_chunks(seed, limit, chunk, budget=budget, wait=True)
    return budget.due - budget.left, chunks
