"""A run of a seed: its row in ``runs`` and its discovery (upsert, sitemap digests,
missing-marking). A :class:`Run` exists only once started on a store, so every
discovery step is tied to a started run by construction."""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from increcrawl_scrapy.schedule.rows import RUN_COUNTS, MissingResult
from increcrawl_scrapy.state.backend import Backend, Session
from increcrawl_scrapy.state.errors import RunOver
from increcrawl_scrapy.state.lastmod import LastmodReport, LastmodRules, apply_moves
from increcrawl_scrapy.urls import host_of

logger = logging.getLogger(__name__)

#: A sitemap's ``(ETag, Last-Modified)`` as its server sent them.
Validators = tuple[str | None, str | None]


_F = TypeVar("_F", bound=Callable[..., Any])


def _step(method: _F) -> _F:
    """A discovery step: serialized, on the live run, after pending results are
    written (discovery must see them, and decides over them)."""

    @functools.wraps(method)
    def wrapper(self: Run, *args: Any, **kwargs: Any) -> Any:
        with self.database.mutex:
            if self.database.current_run is not self:
                raise RunOver(
                    f"run {self.id} is over: a later run started on this store "
                    "(its discovery tables belong to that run now)"
                )
            self._settle()
            return method(self, *args, **kwargs)

    return cast("_F", wrapper)


class Run:
    """Started by :meth:`StateStore.start_run`. The rows its discovery saw carry its
    id (``pages.seen_run``); the rest of what it found is in the connection's
    temporary tables."""

    def __init__(
        self,
        database: Backend,
        run_id: int,
        seed: str,
        *,
        settle: Callable[[], None],
        normalize: Callable[[str], str],
        clock: Callable[[], float],
        default_interval: float,
        missing_runs: int,
        lastmod: LastmodRules,
    ) -> None:
        self.database = database
        self.id = run_id
        self.seed = seed
        self._settle = settle
        self._normalize = normalize
        self._clock = clock
        self._default_interval = default_interval
        self._missing_runs = missing_runs
        self._lastmod = lastmod
        self.repeated, self.taken_over = 0, Counter[str]()  # listed_before()
        self.first = False  # the seed's first run: nothing of it delivered before

    @classmethod
    def start(
        cls, database: Backend, seed: str, max_staleness: float | None = None, **parts: Any
    ) -> Run:
        """A new run of *seed*; rows scheduled past *max_staleness* after their last
        fetch (INCRECRAWL_MAX_STALENESS, set since) are brought within it."""
        with database.transaction() as db:
            (run_id,) = db.execute(db.sql.insert_run, (seed, parts["clock"]())).fetchone()
            if max_staleness is not None:
                db.execute(db.sql.bound_staleness, (max_staleness, max_staleness))
            earlier = db.execute(db.sql.earlier_run, (seed, run_id)).fetchone()
            for statement in db.sql.run_tables:
                db.execute(statement)
        run = cls(database, int(run_id), seed, **parts)
        run.first = earlier is None
        database.current_run = run
        return run

    @_step
    def upsert(
        self,
        entries: Iterable[tuple[str, str | None]],
        *,
        sitemap_url: str | None = None,
        feed: bool = False,
        signal: bool = False,
    ) -> int:
        """Record ``(url, lastmod)`` pairs seen by this run's discovery (one chunk of
        a sitemap), in one set-based transaction: new rows are inserted due now, a
        changed lastmod makes a row due now, a row seen again is no longer missing
        and belongs to this run's seed. URLs that cannot be normalized are skipped.
        A *feed*'s rows never count as missing: a row it finds first is attached to
        it, one a sitemap lists stays with the sitemap. A *signal*'s dates only make
        rows that exist due: it lists nothing, inserts, attaches and marks no row.
        Returns how many were recorded (a signal: none)."""
        now = self._clock()
        latest = _iso(now)
        # A date without a time names a day that begins up to 14 hours before UTC's
        # (UTC+14): a site east of UTC writes tomorrow's date before UTC reaches it.
        latest_day = _iso(now + _EAST_OF_UTC)
        future: Counter[str] = Counter()
        rows: dict[str, tuple[str, str, str | None, str | None, str, bool]] = {}
        for url, lastmod in entries:
            try:
                key = self._normalize(url)
            except ValueError:
                continue
            host = host_of(key)
            ahead = (
                lastmod is not None
                and lastmod > latest
                and not (lastmod.endswith(_DAY_ONLY) and lastmod <= latest_day)
            )
            if ahead:
                # A date in the future: counted, clamped to now for a new row, and
                # never a move (it would move again on every run).
                future[host] += 1
                lastmod = latest
            rows.setdefault(key, (key, url, lastmod, sitemap_url, host, ahead))
        if not rows:
            return 0
        params = {
            "seed": self.seed,
            "now": now,
            "interval": self._default_interval,
            "run": self.id,
        }
        with self.database.transaction() as db:
            for host, count in sorted(future.items()):  # hosts first, by name, as batches
                db.execute(db.sql.count_future, (host, count))
            if sitemap_url is not None and not signal:
                # Known from now on, so its rows are checked for absence even if it is
                # never read whole (an empty digest matches no real one).
                db.execute(db.sql.add_sitemap, {**params, "url": sitemap_url, "feed": feed})
            db.execute(db.sql.clear_chunk)
            db.fill(db.sql.fill_chunk, list(rows.values()))
            for statement in db.sql.chunk_plan:
                db.execute(statement)
            if db.sql.lock_chunk_rows is not None:
                db.execute(db.sql.lock_chunk_rows)
            if signal:
                for statement in db.sql.apply_signal_chunk:
                    db.execute(statement, params)
                return 0
            fresh, taken = listed_before(db, params)
            self.repeated += len(rows) - fresh
            self.taken_over.update(taken)
            for statement in db.sql.apply_feed_chunk if feed else db.sql.apply_chunk:
                db.execute(statement, params)
        return len(rows)

    @_step
    def seen_only(self, urls: Iterable[str]) -> None:
        """URLs discovery listed but the URL rules exclude: their rows are not
        missing (they are not fetched either: the spider skips them)."""
        keys = []
        for url in urls:
            try:
                keys.append((self.id, self._normalize(url)))
            except ValueError:
                continue
        if keys:
            with self.database.transaction() as db:
                db.executemany(db.sql.mark_seen_only, keys)

    @_step
    def apply_lastmod(self) -> LastmodReport:
        """After discovery: what the dates that moved mean (``state/lastmod.py``)."""
        return apply_moves(self.database, self.seed, self._lastmod, self._clock())

    @_step
    def sitemap_unchanged(
        self, sitemap_url: str, digest: str, validators: Validators = (None, None)
    ) -> bool:
        """Whether *sitemap_url* is exactly what this seed read last time. If so the
        caller need not read it again: its rows stay as they are and are not missing
        (its *validators*, as the server sent them now, are kept)."""
        row = self.database.execute(
            self.database.sql.sitemap_digest, (self.seed, sitemap_url)
        ).fetchone()
        if row is None or row["digest"] != digest:
            return False
        with self.database.transaction() as db:
            db.execute(db.sql.add_unchanged, (sitemap_url,))
            db.execute(db.sql.set_sitemap_validators, (*validators, self.seed, sitemap_url))
        return True

    @_step
    def sitemap_conditions(self, sitemap_url: str, settings: str) -> dict[str, str]:
        """Conditional request headers for *sitemap_url* from its last whole read,
        none when that read was under other *settings* (a digest of what changes
        what a sitemap yields: it must be read and applied again)."""
        row = self.database.execute(
            self.database.sql.sitemap_conditions, (self.seed, sitemap_url)
        ).fetchone()
        if row is None or row["settings"] != settings:
            return {}
        headers = {"If-None-Match": row["etag"], "If-Modified-Since": row["last_modified"]}
        return {name: value for name, value in headers.items() if value}

    @_step
    def sitemap_not_modified(self, sitemap_url: str) -> None:
        """The server answered 304 to ``sitemap_conditions``: as unchanged."""
        # The run's own temp table: no lock on the database, no transaction needed.
        self.database.execute(self.database.sql.add_unchanged, (sitemap_url,))

    @_step
    def sitemap_read(
        self,
        sitemap_url: str,
        digest: str,
        validators: Validators = (None, None),
        settings: str | None = None,
        feed: bool = False,
    ) -> None:
        """*sitemap_url* was read whole this run: remember its digest (and its
        validators, under which *settings*). Rows it listed before and no longer
        lists are no longer attached to it, unless it is a *feed* (its items fall
        off it as newer ones come)."""
        with self.database.transaction() as db:
            if not feed:
                db.execute(db.sql.detach_from_sitemap, (sitemap_url, self.id))
            db.execute(
                db.sql.sitemap_read,
                (self.seed, sitemap_url, digest, self._clock(), *validators, settings, feed),
            )

    @_step
    def mark_missing(self) -> MissingResult:
        """After a complete discovery: rows of the run's seed it did not see (and
        that no unchanged sitemap lists) get ``missing_runs + 1``; those reaching
        the threshold become due now. Absence never marks a row gone."""
        params = {
            "seed": self.seed,
            "now": self._clock(),
            "n": self._missing_runs,
            "run": self.id,
        }
        with self.database.transaction() as db:
            db.execute(db.sql.clear_missing)
            db.execute(db.sql.find_missing, params)
            due = db.execute(db.sql.count_missing_due, params).fetchone()[0]
            marked = db.execute(db.sql.mark_missing, params).rowcount
        return MissingResult(marked=marked, due=due)

    def reserve_tokens(self, tokens: int) -> None:
        """Count at least *tokens* on the run's row, committed when this returns: what
        its API calls may spend, before they are sent (``geonode/reservations.py``).
        Blocking: call it in a thread. One statement, committed alone (PostgreSQL
        sends it again on a new connection if the connection dropped)."""
        with self.database.mutex, self.database.locked_errors():
            self.database.execute(self.database.sql.note_tokens, (tokens, self.id))

    def finish(
        self,
        counts: dict[str, int],
        *,
        discovery_complete: bool | None,
        close_reason: str | None = None,
        listed: int | None = None,
        hidden: str | None = None,
    ) -> None:
        """Write the run's counts; results still pending are written first, and date
        moves the caller never judged (apply_lastmod) are judged now, not lost.
        *listed* is the seed's live pages at the end (what fetching them all costs);
        *hidden* the pages the rules took out of comparison (``crawl/hidden.py``)."""
        unknown = set(counts) - set(RUN_COUNTS)
        if unknown:
            raise ValueError(f"unknown run counts: {sorted(unknown)}")
        with self.database.mutex:
            if (
                self.database.current_run is self
                and self.database.execute(self.database.sql.any_moves).fetchone()
            ):
                self.apply_lastmod()
            self._settle()
            with self.database.transaction() as db:
                db.execute(
                    db.sql.finish_run,
                    {
                        **dict.fromkeys(RUN_COUNTS),
                        **counts,
                        "now": self._clock(),
                        "complete": discovery_complete,
                        "reason": close_reason,
                        "listed": listed,
                        "hidden": hidden,
                        "id": self.id,
                    },
                )


_EAST_OF_UTC = 14 * 3600.0
_DAY_ONLY = "T00:00:00Z"  # how a date-only lastmod is stored


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def listed_before(db: Session, params: dict[str, Any]) -> tuple[int, Counter[str]]:
    """What a discovery chunk says before it is applied: ``(rows first listed now,
    {other seed: rows taken from it})`` for the chunk in the chunk table (the same
    URL in two sitemaps, or the same sitemap under two names, is one discovered URL);
    *params* name the run (``run``) and its seed (``seed``)."""
    fresh = 0
    taken: Counter[str] = Counter()
    for seed, count in db.execute(db.sql.listed_before, params).fetchall():
        fresh += count
        if seed is not None and seed != params["seed"]:
            taken[seed] += count
    return fresh, taken
