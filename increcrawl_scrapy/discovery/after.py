"""What a run decides once discovery is over: sitemap dates that moved, and (only
after a complete discovery) the rows it did not list."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.state import RunOver, StateError, driver_errors

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.scope import Scope
    from increcrawl_scrapy.state import Run

logger = logging.getLogger(__name__)


def stopped() -> tuple[type[Exception], ...]:
    """What stops a discovery on the state's side (the run then fetches the queue)."""
    return (*driver_errors(), StateError, RunOver)


def discovery_stopped(state: Any, error: Exception, collector: StatsCollector | None) -> bool:
    """The database stopped this discovery (a lock held too long, a lost
    connection): what it wrote stands, nothing is marked missing, and the run
    fetches what is due. Returns whether discovery was complete (no)."""
    logger.error(
        "Discovery stopped: the state could not take it (%s); the run fetches the queue "
        "as it stands",
        error,
    )
    state.discovery_complete = False
    stats.inc(collector, stats.DISCOVERY_INCOMPLETE)
    return False


#: Why a listed URL is not the seed's site's (``scope.py``); the user's own rules
#: (INCRECRAWL_DENY...) and a bad date refuse nothing of the site by mistake.
NOT_THE_SEEDS = frozenset({"offsite", "bad_host", "ambiguous", "userinfo", "bad_scheme"})


def nothing_kept(collector: StatsCollector | None, scope: Scope) -> bool:
    """Whether the sitemaps read listed pages and every one was refused as not the
    seed's site's, none being unchanged: said in one line (what refused them, and
    the site they had to be on), for the run to end so."""
    if collector is None or collector.get_value(stats.DISCOVERED):
        return False
    if collector.get_value(stats.SITEMAP_UNCHANGED) or collector.get_value(
        stats.SITEMAP_NOT_MODIFIED
    ):
        return False  # what an unchanged sitemap lists is kept from before
    prefix = stats.SITEMAP_SKIPPED.format(reason="")
    refused = {
        key[len(prefix) :]: count
        for key, count in collector.get_stats().items()
        if key.startswith(prefix) and key[len(prefix) :] in NOT_THE_SEEDS and count
    }
    if not refused:
        return False
    logger.warning(
        "The sitemaps listed %d page URLs and none was kept (%s): nothing is discovered; "
        "pages must be on %s (their own redirects decide: a seed on the bare name of a "
        "www. site is followed there)",
        sum(refused.values()),
        ", ".join(f"{count} {reason}" for reason, count in sorted(refused.items())),
        " or ".join(sorted(scope.named)),
    )
    return True


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
