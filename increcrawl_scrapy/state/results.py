"""The results of fetching what the queue handed out, buffered and written in batches.

A page's current state is, in this order: its result not yet written (pending or undelivered,
then the batch being written), else the row the queue handed out or ``load`` read, else
the stored row. That rule lives in :meth:`Results.lookup` and nowhere else;
:meth:`Results.settle` is the one thing discovery does before it writes.
On a shared state (PostgreSQL, perhaps across a network) the crawl never waits on
the database: a flush that recording triggers is written by a writer thread
(``writes.Writer``) with its own connection, while recording goes on into fresh
buffers; rows a recording would read are loaded first by ``load`` on a worker thread.
The store's mutex then guards memory, never a round trip; SQLite flushes in place."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import wait

from increcrawl_scrapy.schedule.leveling import Leveling
from increcrawl_scrapy.schedule.policy import RevisitPolicy, apply_result, classify, new_page
from increcrawl_scrapy.schedule.rows import (
    ITEM_MARK,
    NEVER,
    FetchResult,
    Outcome,
    PageState,
    Recorded,
)
from increcrawl_scrapy.state.backend import Backend, serialized
from increcrawl_scrapy.state.claims import Claims
from increcrawl_scrapy.state.contents import KeptContents
from increcrawl_scrapy.state.history import RunHistory
from increcrawl_scrapy.state.hosts import Hosts
from increcrawl_scrapy.state.loads import CACHE, RowLoads
from increcrawl_scrapy.state.memories import Memories
from increcrawl_scrapy.state.pages import page_of
from increcrawl_scrapy.state.postgres.leases import Lease
from increcrawl_scrapy.state.upkeep import taken_another_way
from increcrawl_scrapy.state.writes import Batch, Writer
from increcrawl_scrapy.urls import host_of

logger = logging.getLogger(__name__)

#: Outcomes whose text is kept (INCRECRAWL_KEEP_CONTENT); a 304 brings none.
_KEPT = (Outcome.NEW, Outcome.CHANGED, Outcome.UNCHANGED)
_EVIDENCE = (Outcome.CHANGED, Outcome.UNCHANGED, Outcome.NOT_MODIFIED)  # about the host's dates


class Results(RowLoads):
    """The result buffer of one store."""

    def __init__(
        self,
        database: Backend,
        *,
        hosts: Hosts,
        policy: RevisitPolicy,
        clock: Callable[[], float],
        flush_items: int,
        flush_seconds: float,
        claims: Claims | None = None,
    ) -> None:
        self.database = database
        self.hosts = hosts
        self.policy = policy
        self.clock = clock
        self.flush_items = flush_items
        self.flush_seconds = flush_seconds
        self._pending: dict[str, PageState] = {}  # written on the next flush
        self._undelivered: dict[str, PageState] = {}  # written once delivered (deliver())
        self._new_keys: set[str] = set()  # unwritten results of rows not in the table
        self._queued: dict[str, PageState] = {}  # handed out or loaded, not recorded
        self._absent: dict[str, None] = {}  # read by load(): not in the table
        self.contents = KeptContents()  # texts, written with their results
        self.memories = Memories()  # pages' memories, written with their results
        self.history = RunHistory()  # the run's checks, written with their results
        # Next checks spread over the coming days (#52); on a shared state the plan
        # and the hosts' priors are read with the rows, on a worker thread.
        self.leveling = Leveling(hosts.planned, clock, None if claims else database)
        hosts.priors_in_place = claims is None
        #: The start of this store's run when it is its seed's first (else None).
        self.first_run_since: float | None = None
        #: Called before results are written (the crawl flushes its feeds first).
        self.before_write: Callable[[], None] | None = None
        self._last_flush = time.monotonic()
        self._retry_at = 0.0  # after a failed write, the next waits this long
        #: A shared state (PostgreSQL): rows are leased to this store while it
        #: fetches them, and results are written by the claims' connection, on a
        #: thread of their own.
        self.claims = claims
        self.shared = claims is not None
        if claims is not None:
            claims.leveling = self.leveling  # its plan read with the claimed rows
        self.io = claims.io if claims is not None else database
        io_lock = claims.lock if claims is not None else database.mutex
        self.writer = Writer(
            self.io, io_lock, hosts.demoted_wait, hosts.min_evidence, hosts.trusted_wait
        )
        self._wanted: dict[str, None] = {}  # keys load() callers wait for
        self._loads = threading.Condition()  # taken with no other lock awaited
        self._reading = False  # a load() caller reads for all
        self._writes_done = 0  # batches written, the keys of the last ones
        self._done_log: deque[tuple[int, frozenset[str]]] = deque(maxlen=16)
        self._epoch = 0  # moves when discovery may change rows (settle())
        self.rebaselined = 0  # results whose change was only that
        self.spending: tuple[int, Callable[[], int]] | None = None  # run, tokens so far

    @property
    def leases_lost(self) -> int:
        return self.claims.lost if self.claims is not None else 0

    # -- rows handed out ---------------------------------------------------------

    def keep_queued(self, pages: list[PageState]) -> None:
        """Rows the queue hands out: the crawl records these next, so recording
        needs no lookup (under the store's mutex)."""
        if len(self._queued) + len(pages) <= CACHE:
            self._queued.update((page.normalized_url, page) for page in pages)

    def keep_claimed(
        self, pages: list[PageState], leases: list[Lease], counts: dict[str, list[float]]
    ) -> None:
        with self.database.mutex:
            assert self.claims is not None
            self.claims.tokens.update((lease.key, lease.token) for lease in leases)
            self.keep_queued(pages)
            self.hosts.learn(counts)

    def release(self) -> int:
        """Give back the rows leased and never recorded (the crawl stops early)."""
        if self.claims is None:
            return 0
        with self.database.mutex:
            mine = [Lease(key, token, 0.0) for key, token in self.claims.tokens.items()]
            self.claims.tokens.clear()
        return self.claims.release(mine)

    # -- one row -----------------------------------------------------------------

    def lookup(self, key: str) -> PageState | None:
        """A row as it stands: unwritten result (the latest first), else queued or
        loaded row, else stored row."""
        page = (
            self._pending.get(key)
            or self._undelivered.get(key)
            or self.writer.in_flight.get(key)
            or self._queued.get(key)
        )
        if page is not None or key in self._absent:
            return page
        row = self.database.tuples(self.database.sql.page_by_key, (key,)).fetchone()
        return page_of(row) if row else None

    def _in_memory(self, key: str) -> bool:
        return (
            key in self._pending
            or key in self._undelivered
            or key in self.writer.in_flight
            or key in self._queued
            or key in self._absent
        )

    def _never_delivered(self, previous: PageState | None) -> bool:
        """Whether nothing of the page can have been delivered: in its seed's first run,
        a row that run made and never fetched. Later, even a row never fetched may have
        been delivered, by a run killed before it wrote the result or before ``forget``
        dropped it (its 404 is reported gone: a gone too many harms less)."""
        since = self.first_run_since
        return since is not None and (
            previous is None or (previous.first_seen >= since and not previous.fetch_count)
        )

    def known(self, key: str) -> bool:
        """Whether recording *key* reads nothing from the table (its row and its
        host's counts are at hand)."""
        return self._in_memory(key) and self.hosts.known(host_of(key))

    # -- results -----------------------------------------------------------------

    @serialized
    def record(
        self,
        key: str,
        url: str,
        seed: str,
        status: int | None,
        *,
        content_hash: str | None = None,
        validators: tuple[str | None, str | None] | None = None,
        site_failure: bool = False,
        final_url: str | None = None,
        moved: bool = False,
        until_delivered: bool = False,
        content: str | None = None,
        memory: bytes | None = None,
        error_kind: str | None = None,
        items_changed: bool = False,
    ) -> Recorded:
        now = self.clock()
        self._collect()
        previous = self.lookup(key)
        self._queued.pop(key, None)  # from now on the result is the row
        self._absent.pop(key, None)
        outcome = classify(
            status if status is not None else 0,
            previous_hash=previous.content_hash if previous else None,
            new_hash=content_hash,
            fetched_before=bool(previous and previous.last_fetched is not None),
            was_gone=bool(previous and previous.gone),
            never_delivered=self._never_delivered(previous),
            moved=moved,  # a permanent redirect of a page that moved (moved_away)
        )
        rebaselined = outcome is Outcome.CHANGED and taken_another_way(previous, items_changed)
        outcome = Outcome.UNCHANGED if rebaselined else outcome  # the new one: a baseline
        self.rebaselined += rebaselined
        if previous is None:
            self._new_keys.add(key)  # a URL discovery never saw: inserted when written
            previous = new_page(key, url, seed, now, self.policy.default_interval)
            previous = previous._replace(host=host_of(key))
        verdict, prior = self.hosts.verdict(previous.host), self.hosts.prior(previous.host)
        result = FetchResult(outcome, status, content_hash, validators, site_failure, final_url)
        place = None if ITEM_MARK in key else self.leveling.place
        page = apply_result(previous, result, now, self.policy, verdict, prior, place)
        if rebaselined:
            page = page._replace(content_hash=content_hash)
        if ITEM_MARK in key:  # a label of its page's item: never fetched on its own
            page = page._replace(next_check=NEVER)
        if outcome in _EVIDENCE and not rebaselined:
            self.hosts.observe(
                previous, outcome is Outcome.CHANGED, now, key if until_delivered else None
            )
        self._pending.pop(key, None)
        self._undelivered.pop(key, None)
        (self._undelivered if until_delivered else self._pending)[key] = page
        if content is not None and outcome in _KEPT:
            self.contents.add(key, content, changed=outcome is not Outcome.UNCHANGED, now=now)
        if memory is not None and outcome is not Outcome.ERROR:
            self.memories.add(key, memory)
        if ITEM_MARK not in key:  # an item row's fetch is its page's
            self.history.add(key, now, status or 0, outcome, error_kind, content_hash)
        if (
            len(self._pending) >= self.flush_items
            or time.monotonic() - self._last_flush >= self.flush_seconds
        ):
            self._flush_soon() if self.shared else self.flush()
        return Recorded(outcome=outcome, page=page)

    @serialized
    def deliver(self, key: str) -> None:
        """An undelivered result's item was delivered: write it with the next flush."""
        self.hosts.delivered(key)
        if (page := self._undelivered.pop(key, None)) is not None:
            self._pending[key] = page

    @serialized
    def discard(self, key: str) -> bool:
        """Forget an undelivered result (its item was not delivered): the row stays as it
        was, so the next run fetches and reports it again."""
        self.hosts.discarded(key)
        if (page := self._undelivered.pop(key, None)) is not None:
            if key not in self.writer.in_flight:  # else an earlier result inserts it
                self._new_keys.discard(key)
            self.contents.discard(key)
            self.memories.discard(key)
            self.history.discard(key)
        return page is not None

    @serialized
    def flush(self) -> int:
        """Write pending results in one transaction, after those being written in
        the background. Returns how many rows."""
        self._collect(block=True)
        batch = self._take()
        if batch is None:
            return 0
        try:
            self.writer.write(batch)
        except BaseException:
            self._restore(batch)
            raise
        self._done(batch)
        return len(batch.pages) - len(batch.lost)

    @serialized
    def hand_off(self) -> None:
        """The crawl is over (nothing more is delivered): flush its feeds one last
        time on the caller's thread, then start writing what is pending (on a shared
        state on the writer thread, awaited by the next ``flush``, which may then run
        on any thread)."""
        if self.before_write is not None:
            self.before_write()
            self.before_write = None
        self._flush_soon() if self.shared else self.flush()

    def before_claim(self, until: float) -> list[str]:
        """Before a claim (on a worker thread): the results recorded so far start
        being written, and the claim skips their rows (still leased to this store:
        the skip matters only once a lease has run out). If one of them is due
        again by *until* (its write would put it back in the queue, as a failure
        that leaves its row due does), the claim waits for the writes and reads the
        written rows instead."""
        with self.database.mutex:
            self._flush_soon()
            unwritten = self._unwritten()
            if all(page.next_check > until for page in unwritten.values()):
                return list(unwritten)
        for _ in range(2):  # the batch being written, then the rest
            with self.database.mutex:
                self._collect()
                if not self.writer.busy:
                    self._flush_soon()
                future = self.writer.future
            if future is None:
                break
            wait([future])
        with self.database.mutex:
            return [key for key, page in self._unwritten().items() if page.next_check > until]

    def _unwritten(self) -> dict[str, PageState]:
        return {**self.writer.in_flight, **self._pending, **self._undelivered}

    def _flush_soon(self) -> None:
        """Hand pending results to the writer thread, unless it is writing: then
        they wait for the next flush (one batch at a time keeps their order)."""
        self._collect()
        if not self.writer.busy and time.monotonic() >= self._retry_at:
            batch = self._take()
            if batch is not None:
                self.writer.start(batch)

    def _collect(self, *, block: bool = False) -> None:
        """The outcome of the batch the writer thread took, once it is written (with
        *block*, waiting for it): done, or back in the buffers if it failed."""
        finished = self.writer.finished(block=block)
        if finished is None:
            return
        batch, error = finished
        if error is None:
            self._done(batch)
            return
        self._restore(batch)
        self._retry_at = time.monotonic() + self.flush_seconds  # not at every record
        logger.error(
            "Could not write %d results (%s): they are kept and written with the next flush",
            len(batch.pages),
            error,
        )

    def _take(self) -> Batch | None:
        """The pending results and what is written beside them, out of the buffers."""
        self._last_flush = time.monotonic()
        if not self._pending and not self.memories.alone:
            return None
        if self.before_write:
            self.before_write()
        pages, self._pending = self._pending, {}
        fences = self.claims.tokens if self.claims is not None else {}
        leased = {key: fences.pop(key) for key in pages if key in fences}
        now, spending = self.clock(), self.spending
        return Batch(
            pages=pages,
            new={key for key in pages if key in self._new_keys},
            hosts=self.hosts.take(),
            contents=self.contents.take(list(pages)),
            memories=self.memories.take(list(pages)),
            checks=self.history.take(list(pages)),
            leased=leased,
            keep={key for key in leased if pages[key].next_check <= now},
            tokens=(spending[0], spending[1]()) if spending else None,
        )

    def _done(self, batch: Batch) -> None:
        self._new_keys.difference_update(batch.pages)
        self.hosts.written(batch.host_totals)
        self._writes_done += 1
        self._done_log.append((self._writes_done, frozenset(batch.pages)))
        if batch.lost and self.claims is not None:
            self.claims.lost += len(batch.lost)
            logger.warning(
                "%d results not written: another worker took their pages over (their "
                "leases expired; INCRECRAWL_LEASE_SECONDS may be too short)",
                len(batch.lost),
            )

    def _restore(self, batch: Batch) -> None:
        """A batch that could not be written goes back, under later results."""
        for key, page in batch.pages.items():
            if key not in self._pending and key not in self._undelivered:
                self._pending[key] = page
        self.contents.restore(batch.contents)
        self.memories.restore(batch.memories)
        self.history.restore(batch.checks)
        self.hosts.restore(batch.hosts)
        if self.claims is not None:
            for key, token in batch.leased.items():
                self.claims.tokens.setdefault(key, token)

    @serialized
    def abandon(self) -> int:
        """Drop every result not written yet (the database stays locked by another
        program): their rows stay as they were, due. Returns how many."""
        batch = self._take()
        undelivered, self._undelivered = len(self._undelivered), {}
        return undelivered + (len(batch.pages) if batch is not None else 0)

    @serialized
    def settle(self) -> None:
        """Before discovery writes: pending results go to the table first (discovery
        decides over them), and rows handed out or loaded may change under it."""
        self.flush()
        self._queued.clear()
        self._absent.clear()
        self._epoch += 1

    def close(self) -> None:
        """Write what is pending, give back unanswered leases, stop the writer. (A
        crawl on a shared state has waited out a restarting server for its last write
        before: ``claims.write_last``.)"""
        try:
            self.flush()
            self.release()
        finally:
            self.writer.shutdown()
