"""One state store and one run row per crawl, shared by the spider and the pipeline.

Both need the same SQLite connection (results buffered by the pipeline must be
visible to the spider's queue), so the store is opened once per crawler, on first
use; the run is finished and the store closed on ``spider_closed``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import CloseSpider
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from increcrawl_scrapy import close_reasons, compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.config.unknown import warn_unknown_settings
from increcrawl_scrapy.crawl import run_warnings
from increcrawl_scrapy.crawl.arguments import flag
from increcrawl_scrapy.crawl.hidden import HiddenPages
from increcrawl_scrapy.crawl.run_summary import run_summary
from increcrawl_scrapy.crawl.shared_links import SharedLinks
from increcrawl_scrapy.geonode.client import client_for
from increcrawl_scrapy.geonode.reservations import Reservations
from increcrawl_scrapy.scope import is_incremental
from increcrawl_scrapy.state import RUN_COUNTS, StateLockedError, StateStore, is_postgres

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred

    from increcrawl_scrapy.crawl.delivery import Delivery

logger = logging.getLogger(__name__)

#: INCRECRAWL_MAX_ERROR_RATIO is judged on at least this many fetches.
MIN_FETCHES_FOR_RATIO = 10


class CrawlState:
    """The crawl's store and its run row."""

    def __init__(self, crawler: Crawler) -> None:
        run_warnings.keep_warnings(crawler)  # repeated in the run summary
        config = config_for(crawler)
        path = config.db_path if is_postgres(config.db_path) else os.path.abspath(config.db_path)
        if path != config.db_path:
            if scrapyd_job(crawler):
                logger.warning(
                    "INCRECRAWL_DB %r is relative: under Scrapyd it resolves against "
                    "Scrapyd's working directory, to %s. Give an absolute path "
                    "(schedule.json setting=INCRECRAWL_DB=/path/to/state.sqlite)",
                    config.db_path,
                    path,
                )
            else:
                logger.info("INCRECRAWL_DB %r resolved to %s", config.db_path, path)
        self.crawler = crawler
        self.store = StateStore.from_config(config, exclusive=True)
        stats.inc(crawler.stats, stats.REKEYED, self.store.rekeyed.rekeyed)
        stats.inc(crawler.stats, stats.REKEY_MERGED, self.store.rekeyed.merged)
        self.seed = seed_of(crawler)
        self.run = self.store.start_run(self.seed)
        self.store.note_spending(
            self.run.id, lambda: int(crawler.stats.get_value(stats.API_TOKENS, 0) or 0)
        )
        #: What the crawl's API calls may spend, in the run's row before they are sent.
        self.reservations = Reservations(
            self.run.reserve_tokens, lambda: int(crawler.stats.get_value(stats.API_TOKENS, 0) or 0)
        )
        if config.uses_geonode:
            client_for(crawler).reservations = self.reservations
        self.max_error_ratio = config.max_error_ratio
        self.tokens_plan = (config.tokens_reset_day, config.monthly_tokens)
        #: Set by a spider that discovers; None for an embedding project's spiders.
        self.discovery_complete: bool | None = None
        #: A close reason the crawl ends with once it has done what it can
        #: (close_reasons.py), e.g. discovery read no source.
        self.failure: str | None = None
        #: Page URL -> (ETag, Last-Modified) of its last 200, for the pipeline
        #: (SkipNotDueMiddleware; the incremental spider's items carry their own).
        self.validators: dict[str, tuple[str | None, str | None]] = {}
        #: The requests whose response is in hand, its items not recorded yet
        #: (Scrapy's request fingerprints): the same request is not sent again
        #: unless it is ``dont_filter`` (SkipNotDueMiddleware).
        self.in_hand: set[bytes] = set()
        #: Pages a response of this run (or a start request) led to, pages replays
        #: of pages fetched within UNREACHED_AGE led to (``pages/listings.py``), and
        #: pages skipped as not due for a replayed request (canonical URLs): an
        #: older replay shows nothing of the page it leads to (``pages/unreached.py``).
        self.linked: set[str] = set()
        self.replay_linked: set[str] = set()
        self.replay_skipped: set[str] = set()
        #: The spider's callbacks that yield items, once read (``item_callbacks.py``).
        self.item_callbacks: set[str] | None = None
        #: Says why the Geonode API is down at the end of the run, or None (set by
        #: the spider: its client's breaker).
        self.api_down: Callable[[], str | None] | None = None
        #: Pages the rules took out of comparison, per host (``hidden.py``).
        self.hidden = HiddenPages()
        #: The links most of a host's pages share in their text (``shared_links.py``).
        self.shared_links = SharedLinks()
        #: The pipeline's delivery of undelivered results (None without the pipeline).
        self.delivery: Delivery | None = None
        #: Another program's lock met while recording (an sqlite3 shell's open
        #: transaction): the crawl stops with ``database_in_use``.
        self.in_use: StateLockedError | None = None
        if flag("increcrawl_reset", getattr(crawler.spider, "increcrawl_reset", False)):
            again = self.store.make_due(seed=self.seed)
            logger.info("increcrawl_reset: the schedule starts over (%d pages due now)", again)
        if not is_incremental(crawler.spider):
            # A project's own spider has no queue to count: its run's due pages are
            # those the schedule had due as it started (``status`` said ``due 0``).
            now = self.began = config.clock()
            due = self.store.reader().status_counts(self.seed, now, now)["due_now"]
            stats.inc(crawler.stats, stats.DUE, int(due or 0))
        warn_unknown_settings(crawler.settings)

    def stop_in_use(self, exc: StateLockedError) -> None:
        """A write found the database locked past INCRECRAWL_DB_LOCK_TIMEOUT: said
        once, and the crawl ends with ``database_in_use`` (exit code 75); what was
        not written stays due."""
        if self.in_use is not None:
            return
        self.in_use = exc
        logger.error(
            "Try later: %s (the crawl ends with %s; the pages not recorded stay due)",
            exc,
            close_reasons.IN_USE,
        )
        deferred_from_coro(compat.close_spider(self.crawler, close_reasons.IN_USE))

    def idle(self) -> None:
        """The crawl has nothing left to do: end it with the failure it met, if any."""
        reason = self.failure or self._api_down() or self._error_ratio_exceeded()
        if reason:
            raise CloseSpider(reason)

    def _api_down(self) -> str | None:
        """The Geonode API's last calls all failed (its breaker is open): nothing
        more was sent, and cron must hear it (batch jobs leave no page errors)."""
        down = self.api_down() if self.api_down is not None else None
        if down:
            logger.error("%s: the run ends with %s", down, close_reasons.API_UNREACHABLE)
            return close_reasons.API_UNREACHABLE
        return None

    def _error_ratio_exceeded(self) -> str | None:
        value = self.crawler.stats.get_value if self.crawler.stats else None
        if value is None:
            return None
        errors = int(value(stats.ERRORS, 0))
        fetched = errors + sum(int(value(key, 0)) for key in stats.BY_CHANGE.values())
        if fetched and errors == fetched:
            logger.error(
                "every one of the %d fetches failed: the run ends with %s; the failed "
                "pages stay due or back off",
                fetched,
                close_reasons.TOO_MANY_ERRORS,
            )
            return close_reasons.TOO_MANY_ERRORS
        if fetched >= MIN_FETCHES_FOR_RATIO and errors > self.max_error_ratio * fetched:
            logger.error(
                "%d of %d fetches failed (more than INCRECRAWL_MAX_ERROR_RATIO=%g): the run "
                "ends with %s; the failed pages stay due or back off",
                errors,
                fetched,
                self.max_error_ratio,
                close_reasons.TOO_MANY_ERRORS,
            )
            return close_reasons.TOO_MANY_ERRORS
        return None

    def close(self, reason: str) -> None:
        """Finish the run with the crawl's counts, flush and close the store; with
        the database still locked by another program, leave the run unfinished and
        its unwritten results undone (their pages stay due)."""
        try:
            self._finish(reason)
        except StateLockedError as exc:
            if self.in_use is None:  # met only now, writing the last results
                logger.error("Try later: %s (the crawl ends with %s)", exc, close_reasons.IN_USE)
            close_reasons.seen.append(close_reasons.IN_USE)  # the exit code says it
            logger.error(
                "%d results not written, the database still in use: their pages stay due",
                self.store.abandon(),
            )
        finally:
            self.store.close()

    def _finish(self, reason: str) -> None:
        if self.in_use is not None:
            self.store.flush()  # free again? else StateLockedError
        collector = self.crawler.stats
        value = collector.get_value if collector is not None else (lambda key, default=0: default)
        counts = {name: int(value(stats.BY_RUN_COUNT[name], 0)) for name in RUN_COUNTS}
        linked = self.shared_links.warnings(self.store.remembered, self.store.remember)
        for line in linked:  # most of a host's pages changed with the links they share
            logger.warning("%s", line)
        # A reservation no answer settled (a batch job cancelled unread) counts as spent.
        counts["tokens_charged"] += self.reservations.unsettled()
        noisy, examples = self.store.unannounced(self.seed)
        if noisy:
            logger.warning(
                "%d pages changed more than once while their sitemap date did not "
                "move (%s%s): volatile text the rules miss? Only their first such change "
                "counts as evidence about the dates; %s",
                noisy,
                ", ".join(examples),
                ", ..." if noisy > len(examples) else "",
                # A pattern for a link would miss the next: the line above says what to do.
                "see the links above" if linked else "add INCRECRAWL_VOLATILE_PATTERNS",
            )
        for line in self.hidden.warnings():  # a rule that fired on much of a host
            logger.warning("%s", line)
        # After writing every result. A live page the sitemaps no longer list (missing,
        # never gone for that alone) is not listed: the count agrees with discovery's.
        listed = self.store.count(self.seed, gone=False, missing_runs=0)
        stats.inc(collector, stats.LEASES_LOST, self.store.leases_lost)
        self.run.finish(
            counts,
            discovery_complete=self.discovery_complete,
            close_reason=reason,
            listed=listed,
            hidden=self.hidden.dumps(),
        )
        self.store.finish_history(self.run)
        logger.info(
            run_summary(
                value,
                seed=self.seed,
                listed=self._pages(listed),
                verdicts=self.store.lastmod_verdicts(self.seed),
                reason=reason,
                embedded=not is_incremental(self.crawler.spider),
                warnings=run_warnings.release(self.crawler),
                tokens=self.store.token_figures(self.store.clock(), *self.tokens_plan),
            )
        )

    def _pages(self, listed: int) -> int:
        """What the summary weighs the run's fetches against: the listed pages, or a
        project's own spider's pages with state (a page found gone by this run is
        one, its items' rows are not)."""
        if is_incremental(self.crawler.spider):
            return listed
        return self.store.with_state(self.seed, self.began)


def crawl_state(crawler: Crawler) -> CrawlState:
    """The crawl's state, opened (with the crawl lock) on first call.

    A database another crawl holds raises StateLockedError here, every call: the
    first one logs it in one line and ends the crawl with ``database_in_use`` as
    soon as it is open (closing it while it opens would fail in Scrapy itself)."""
    kept = compat.kept_of_crawl(crawler)
    state: CrawlState | None = kept.get("state")
    if state is not None:
        return state
    if kept.get("state_closed"):
        raise RuntimeError("the crawl's state store is already closed")
    locked = kept.get("state_locked")
    if locked is not None:
        raise locked
    try:
        state = kept["state"] = CrawlState(crawler)
    except StateLockedError as exc:
        kept["state_locked"] = exc
        logger.error("Try later: %s (the crawl ends with %s)", exc, close_reasons.IN_USE)
        compat.connect_for_crawl(crawler, _close_when_open, signals.spider_opened)
        raise

    def closed(reason: str) -> Coroutine[Any, Any, None] | None:
        kept["state_closed"] = True
        closing = kept.pop("state", None)
        if closing is None:
            return None
        delivery = closing.delivery
        uploads = delivery.uploads_pending() if delivery is not None else None
        if uploads is not None:  # remote feeds: their uploads decide what was delivered
            return _after(uploads, closing, reason)
        return _close(closing, reason)

    compat.connect_for_crawl(crawler, closed, signals.spider_closed)
    compat.connect_for_crawl(crawler, state.idle, signals.spider_idle)
    return state


async def _after(uploads: Deferred[None], closing: CrawlState, reason: str) -> None:
    await maybe_deferred_to_future(uploads)
    done = _close(closing, reason)
    if done is not None:
        await done


def _close(closing: CrawlState, reason: str) -> Coroutine[Any, Any, None] | None:
    if not closing.store.shared:
        closing.close(reason)  # a local file
        return None
    # A shared state: the last results are taken here (the feeds are flushed on
    # this thread); counting, finishing the run and closing off it.
    closing.store.hand_off()
    return _close_shared(closing, reason)


async def _close_shared(closing: CrawlState, reason: str) -> None:
    with contextlib.suppress(Exception):  # not an outage: close() says it
        await closing.store.write_last()
    await compat.in_thread(closing.close, reason)


def _close_when_open(spider: Spider) -> None:
    from twisted.internet import reactor, task

    crawler = spider.crawler
    task.deferLater(
        reactor,
        0,
        lambda: deferred_from_coro(compat.close_spider(crawler, close_reasons.IN_USE)),
    )


def scrapyd_job(crawler: Crawler) -> str | None:
    """The Scrapyd job id when the crawl runs as a Scrapyd job: Scrapyd passes it
    as the ``_job`` spider argument (1.6 no longer sets ``SCRAPY_JOB``)."""
    job = getattr(crawler.spider, "_job", None) or os.environ.get("SCRAPY_JOB")
    return str(job) if job else None


def seed_of(crawler: Crawler) -> str:
    """The seed a crawl's rows belong to: the incremental spider's sitemap or site,
    or the spider's name for an embedding project's own spiders."""
    spider = crawler.spider
    seed = getattr(spider, "increcrawl_seed", None)
    return str(seed or (spider.name if spider is not None else "default"))
