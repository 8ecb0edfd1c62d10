"""What a run decides once discovery is over: sitemap dates that moved, and (only
after a complete discovery) the rows it did not list."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat, stats

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)


async def after_discovery(run: Run, complete: bool, collector: StatsCollector | None) -> None:
    # Updates over a seed's rows (seconds at 10M): off the reactor's thread.
    await compat.in_thread(_judge, run, complete, collector)


def _judge(run: Run, complete: bool, collector: StatsCollector | None) -> None:
    dates = run.apply_lastmod()
    stats.inc(collector, stats.LASTMOD_MOVED, dates.moved)
    stats.inc(collector, stats.LASTMOD_DUE, dates.due)
    stats.inc(collector, stats.LASTMOD_WAVES, len(dates.waves))
    stats.inc(collector, stats.LASTMOD_SAMPLED, dates.sampled)
    if complete:
        missing = run.mark_missing()
        stats.inc(collector, stats.MISSING, missing.marked)
        stats.inc(collector, stats.MISSING_DUE, missing.due)
    else:
        logger.warning(
            "Discovery was incomplete: pages absent from it are not counted as missing this run"
        )
        stats.inc(collector, stats.DISCOVERY_INCOMPLETE)
