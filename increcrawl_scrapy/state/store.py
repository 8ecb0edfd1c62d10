"""``StateStore``: the per-URL crawl state (a SQLite file or a PostgreSQL server),
the crawl's one door into it: nothing outside ``state/`` reaches its parts.

The parts below it each own one concern: ``database`` (opening, identity,
migrations, transactions, one crawl per file), ``upkeep`` (keys and fingerprints
under changed settings), ``runs`` (a run and its discovery), ``queue`` (the change
queue, a fetch budget's choice) and ``results`` (buffered results). Time comes from
an injected clock so tests and the simulator can move it. Thread-safe: every public
method holds the store's mutex, so discovery can run in a worker thread while the
reactor records."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.config import BUDGET_ORDERS
from increcrawl_scrapy.content.fingerprint import VOLATILE_PATTERNS, content_fingerprint
from increcrawl_scrapy.content.page_text import ContentOptions
from increcrawl_scrapy.schedule.policy import RevisitPolicy, policy_from_config
from increcrawl_scrapy.schedule.rows import PAGE_COLUMNS, PageState, Recorded, RekeyResult
from increcrawl_scrapy.state import history, memories
from increcrawl_scrapy.state.backend import Backend, serialized
from increcrawl_scrapy.state.claims import Claims, write_last
from increcrawl_scrapy.state.edits import OperatorEdits
from increcrawl_scrapy.state.hosts import Hosts
from increcrawl_scrapy.state.lastmod import LastmodRules
from increcrawl_scrapy.state.locations import is_postgres
from increcrawl_scrapy.state.postgres.database import PostgresDatabase
from increcrawl_scrapy.state.queue import CHUNK, Budget, ChangeQueue, choose
from increcrawl_scrapy.state.readings import StoreReadings
from increcrawl_scrapy.state.results import Results
from increcrawl_scrapy.state.runs import Run
from increcrawl_scrapy.state.sqlite.database import CrawlLock, Database
from increcrawl_scrapy.state.upkeep import (
    check_content_scheme,
    check_normalization,
    check_volatile_rules,
    stored_normalize,
)
from increcrawl_scrapy.urls import RULES_VERSION, normalization_settings, normalize_url

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig


class StateStore(OperatorEdits, StoreReadings):
    """The crawl state at one location (a file's path or a DSN)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        policy: RevisitPolicy | None = None,
        clock: Callable[[], float] = time.time,
        missing_runs: int = 3,
        flush_items: int = 100,
        flush_seconds: float = 5.0,
        lock_timeout: float = 10.0,
        lease_seconds: float = 600.0,
        exclusive: bool = False,
        normalize: Callable[[str], str] = normalize_url,
        normalization: Mapping[str, Any] | None = None,
        lastmod: LastmodRules | None = None,
        budget_order: str = "change",
        volatile_patterns: tuple[str, ...] | None = None,
        content_scheme: tuple[str, ...] | None = None,
        keys_as_stored: bool = False,
        history_runs: int = 100,
    ) -> None:
        self.path = str(path)
        self.policy = policy or RevisitPolicy()
        self.clock = clock
        self.missing_runs = missing_runs
        self.normalize = normalize
        self.lastmod = lastmod or LastmodRules()
        if budget_order not in BUDGET_ORDERS:
            raise ValueError(f"budget_order must be one of {BUDGET_ORDERS}, not {budget_order!r}")
        self.budget_order = budget_order
        shared = is_postgres(self.path)  # a server's state has no file to lock
        self._lock = CrawlLock(self.path).acquire() if exclusive and not shared else None
        try:
            # One interface, each backend with its own statements: every part
            # runs on either.
            self.database: Backend = (
                PostgresDatabase(self.path, lock_timeout)
                if shared
                else Database(self.path, lock_timeout)
            )
            if self._lock is not None and isinstance(self.database, Database):
                # A crawl: the file must take its writes (another program may hold it).
                try:
                    self.database.check_writable()
                except BaseException:
                    self.database.close()
                    raise
        except BaseException:
            self._release()
            raise
        wait, trusted = self.policy.demoted_max_interval, self.policy.trusted_wait
        self.hosts = Hosts(self.database, self.lastmod.min_evidence, wait, trusted)
        #: What the last re-keying did (normalization settings changed).
        self.rekeyed = RekeyResult(0, 0)
        self.old_fingerprints = 0  # pages of an old text scheme when it opened
        claims = None
        if shared:  # claims and writes with a connection of their own (results.py)
            try:
                io = PostgresDatabase(self.path, lock_timeout)
            except BaseException:
                self.database.close()
                raise
            claims = Claims(io, threading.Lock(), clock, self.hosts)
            claims.seconds = lease_seconds
        self.results = Results(
            self.database,
            hosts=self.hosts,
            policy=self.policy,
            clock=clock,
            flush_items=flush_items,
            flush_seconds=flush_seconds,
            claims=claims,
        )
        self.results.history.keep_runs = history_runs
        self.queue = ChangeQueue(self.results)
        try:
            if keys_as_stored:  # the operator's commands: the state's keys as they are
                self.normalize = stored_normalize(self.database, RULES_VERSION, normalize)
                normalization = volatile_patterns = content_scheme = None
            if normalization is not None:
                self.rekeyed = check_normalization(self.database, normalization, normalize)
            if volatile_patterns is not None:
                check_volatile_rules(
                    self.database,
                    (*VOLATILE_PATTERNS, *volatile_patterns),
                    partial(content_fingerprint, extra_patterns=volatile_patterns),
                    clock(),
                )
            if content_scheme is not None:
                self.old_fingerprints = check_content_scheme(self.database, content_scheme, clock())
        except BaseException:
            self.close()
            raise

    @classmethod
    def from_config(
        cls,
        config: IncrecrawlConfig,
        *,
        clock: Callable[[], float] | None = None,
        exclusive: bool = False,
        keys_as_stored: bool = False,
    ) -> StateStore:
        """A store as *config* says; with *keys_as_stored* (the operator's commands),
        URLs are keyed by the settings stored with the state, which is neither
        re-keyed nor re-fingerprinted under *config*'s."""
        return cls(
            config.db_path,
            policy=policy_from_config(config),
            clock=clock or config.clock,
            missing_runs=config.missing_runs,
            flush_items=config.flush_items,
            flush_seconds=config.flush_seconds,
            lock_timeout=config.db_lock_timeout,
            lease_seconds=config.lease_seconds,
            exclusive=exclusive,
            normalize=partial(normalize_url, **normalization_settings(config)),
            normalization={**normalization_settings(config), "rules": RULES_VERSION},
            lastmod=LastmodRules(
                min_evidence=config.lastmod_min_evidence,
                wave_share=config.lastmod_wave_share,
                sample=config.lastmod_sample,
            ),
            budget_order=config.budget_order,
            volatile_patterns=config.volatile_patterns,
            content_scheme=ContentOptions.from_config(config).schemes(),
            keys_as_stored=keys_as_stored,
            history_runs=config.history_runs,
        )

    @property
    def rebaselined(self) -> int:
        """Results whose only change was how their fingerprint is taken (not reported)."""
        return self.results.rebaselined

    # -- runs ----------------------------------------------------------------

    @serialized
    def start_run(self, seed: str) -> Run:
        """Record a new run of *seed*; its discovery goes through the returned Run
        (a later run on this store ends this one's discovery)."""
        started = self.clock()  # rows made from now on are this run's
        run = Run.start(
            self.database,
            seed,
            settle=self.results.settle,
            normalize=self.normalize,
            clock=self.clock,
            default_interval=self.policy.default_interval,
            max_staleness=self.policy.max_staleness,
            missing_runs=self.missing_runs,
            lastmod=self.lastmod,
        )
        self.results.history.begin(run.id)
        self.results.leveling.new_run()  # the plan and the priors read again
        self.hosts.new_run()
        self.results.first_run_since = started if run.first else None
        return run

    @serialized
    def finish_history(self, run: Run) -> None:
        """After ``run.finish``: its responses by kind kept, older runs' checks dropped."""
        history.finish(self.database, run.id, run.seed, self.results.history)

    # -- the change queue ----------------------------------------------------

    def due(self, seed: str, limit: int | None = None) -> list[PageState]:
        """Rows of *seed* due, most overdue first: live rows, and gone rows still listed
        (their slow re-check). At most *limit*: the likeliest changed (``budget()``)."""
        return [page for chunk in self.due_chunks(seed, limit) for page in chunk]

    def due_chunks(
        self,
        seed: str,
        limit: int | None = None,
        size: int = CHUNK,
        *,
        budget: Budget | None = None,
        wait: bool = False,
    ) -> Iterator[list[PageState]]:
        """The same rows in chunks of at most *size*, each read as the previous one
        is used (keyset pagination on the queue's stored order). When *limit* is
        smaller than the due set, the *budget*'s choice (``budget()``) instead. On a
        shared state the rows are leased to this store; with *wait*, an empty chunk
        says other workers hold the rest for now (a crawl waits and asks again)."""
        if limit and budget is None:
            budget = self.budget(seed, limit)
        if budget is None or budget.chosen is None:
            return self.queue.chunks(seed, limit, size, wait=wait)
        return self.queue.chosen_chunks(budget.chosen, size, wait=wait)

    @serialized
    def budget(self, seed: str, limit: int | None) -> Budget:
        """Which due rows of *seed* a run fetching at most *limit* takes: those
        likeliest to have changed (``state/queue.py``), or the longest overdue."""
        self.results.flush()
        return choose(self.database, seed, self.clock(), limit, self.budget_order)

    @serialized
    def get(self, url: str) -> PageState | None:
        """The current state of *url* (normalized here), unwritten results included."""
        return self.results.lookup(self.normalize(url))

    @serialized
    def count(self, seed: str | None = None, **where: Any) -> int:
        """How many rows match; *where* names columns (``gone=True``)."""
        if set(where) - set(PAGE_COLUMNS):
            raise ValueError(f"unknown columns in {sorted(where)}")
        params = [*where.values(), *([seed] if seed is not None else [])]
        sql = self.database.sql.count_pages(list(where), seed is not None)
        self.results.flush()
        return int(self.database.execute(sql, params).fetchone()[0])

    # -- fetch results -------------------------------------------------------

    def record(  # serialized by Results.record
        self,
        url: str,
        status: int | None,
        *,
        seed: str,
        key: str | None = None,
        content_hash: str | None = None,
        validators: tuple[str | None, str | None] | None = None,
        site_failure: bool = False,
        final_url: str | None = None,
        moved: bool = False,
        lease: str | None = None,
        until_delivered: bool = False,
        content: str | None = None,
        memory: bytes | None = None,
        error_kind: str | None = None,
        items_changed: bool = False,
    ) -> Recorded:
        """Buffer the result of fetching *url* and return what it meant.

        *key* is the row's key as the queue handed it out (so a result always lands
        on the row that was due); without it *url* is normalized. *status* is the
        origin's HTTP status, or None for a network or API failure. A failure with
        *site_failure* (the site answered 4xx/5xx or timed out) backs the row off;
        any other failure leaves it due (*error_kind* says what failed: ``timeout``...).
        *validators* is ``(etag, last_modified)`` as the origin sent them; None means
        the fetcher cannot see them (Geonode). With *until_delivered*, the result is written
        only once :meth:`deliver` is called. *content* is the page's text, kept when
        given (INCRECRAWL_KEEP_CONTENT); *memory* what the fetch leaves for the next
        one (``pages/memory.py``); *items_changed*: its items changed (by that match),
        a change even if its fingerprint was taken another way (``upkeep.py``); *moved*:
        a permanent redirect of a page that moved. *lease* is the token a shared
        backend checks (one SQLite file has one crawl, the crawl lock: none)."""
        return self.results.record(
            key or self.normalize(url),
            url,
            seed,
            status,
            content_hash=content_hash,
            validators=validators,
            site_failure=site_failure,
            final_url=final_url,
            moved=moved,
            until_delivered=until_delivered,
            content=content,
            memory=memory,
            error_kind=error_kind,
            items_changed=items_changed,
        )

    def note_spending(self, run_id: int, charged: Callable[[], int]) -> None:
        """Write the tokens *charged* so far (read when results are written, on any
        thread) on run *run_id*'s row with each batch of results: a run killed after
        spending them still spent them, and overlapping runs see each other's."""
        self.results.spending = (run_id, charged)

    def deliver(self, key: str) -> None:
        self.results.deliver(key)

    def discard(self, key: str) -> bool:
        return self.results.discard(key)

    def keep_memory(self, key: str, body: bytes, *, recorded: bool) -> bool:
        return memories.keep_alone(self.results, key, body, recorded=recorded)

    def flush(self) -> int:
        """Write buffered results in one transaction. Returns how many rows."""
        return self.results.flush()

    async def write_last(self) -> int:
        """The crawl's last write (``claims.write_last``)."""
        return await write_last(self.flush, self.results.claims)

    def load(self, keys: list[str]) -> None:
        """Read rows before recording them (``Results.load``): off the reactor's thread."""
        self.results.load(keys)

    def known(self, key: str) -> bool:
        return self.results.known(key)

    @serialized
    def claim_discovery(self, seed: str) -> bool:
        """Whether this store may read *seed*'s sources now: always with SQLite (one
        crawl a file); on PostgreSQL, one crawl a seed at a time (a session advisory
        lock, gone with a dead worker's connection)."""
        statement = self.database.sql.discovery_lock
        if statement is None:
            return True
        return bool(self.database.execute(statement, (seed,)).fetchone()[0])

    @serialized
    def end_discovery(self, seed: str) -> None:
        statement = self.database.sql.discovery_unlock
        if statement is not None:
            self.database.execute(statement, (seed,))

    @property
    def shared(self) -> bool:
        """Whether several crawls may work on this state at once (PostgreSQL)."""
        return self.results.shared

    def heartbeat(self, seed: str, ttl: float) -> tuple[int, int]:
        """Live crawls on *seed* and on the whole state, this one included (one and
        one with SQLite: a file has one crawl). On a shared state the leases of the
        pages this crawl still fetches are renewed (a batch job outlives a lease)."""
        claims = self.results.claims
        if claims is None or self.database.closed:
            return 1, 1
        with self.database.mutex:  # the leases of pages in flight, renewed with the beat
            leased = dict(claims.tokens)
        return claims.beat(seed, ttl, leased)

    # -- the crawl's end ------------------------------------------------------

    def write_first(self, before_write: Callable[[], None]) -> None:
        """Have *before_write* run before each write of results (a crawl's feeds)."""
        self.results.before_write = before_write

    def hand_off(self) -> None:
        """The crawl is over: last feeds flushed here, pending results written."""
        self.results.hand_off()

    def abandon(self) -> int:
        """Drop the results not written yet (the file still locked): how many."""
        return self.results.abandon()

    @property
    def leases_lost(self) -> int:
        """Results not written because their lease had gone to another crawl."""
        return self.results.leases_lost

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.database.closed

    def close(self) -> None:
        """Flush and close; safe to call twice. Held results are not written."""
        if self.database.closed:
            return
        try:
            self.results.close()  # rows leased and never answered go back to the others
            if self.results.claims is not None:
                self.results.claims.leave()
        finally:
            self.database.close()
            if self.results.claims is not None:
                with self.results.claims.lock:  # the claims' connection: its lock
                    self.results.claims.io.close()
            self._release()

    def _release(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
