"""A run of a seed: its row in ``runs`` and its discovery (upsert, sitemap digests,
missing-marking). A :class:`Run` exists only once started on a store, so every
discovery step is tied to a started run by construction."""

from __future__ import annotations

import functools
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from increcrawl_scrapy.rows import RUN_COUNTS, MissingResult
from increcrawl_scrapy.state.database import Database, RunOver
from increcrawl_scrapy.state.lastmod import LastmodReport, LastmodRules, apply_moves
from increcrawl_scrapy.state.listing import COUNT_FUTURE, listed_before
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
        database: Database,
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
        self.repeated, self.taken_over = 0, Counter[str]()  # listing.py: listed_before

    @classmethod
    def start(cls, database: Database, seed: str, **parts: Any) -> Run:
        with database.transaction() as db:
            insert = "INSERT INTO runs (seed, started_at) VALUES (?, ?)"
            if database.dialect != "sqlite":  # no lastrowid there (SQLite 3.35 for this)
                insert += " RETURNING id"
            cursor = db.execute(insert, (seed, parts["clock"]()))
            run_id = cursor.lastrowid if database.dialect == "sqlite" else cursor.fetchone()[0]
            for statement in _RUN_TABLES:
                db.execute(statement)
        run = cls(database, int(run_id or 0), seed, **parts)
        database.current_run = run
        return run

    @_step
    def upsert(
        self,
        entries: Iterable[tuple[str, str | None]],
        *,
        sitemap_url: str | None = None,
        feed: bool = False,
    ) -> int:
        """Record ``(url, lastmod)`` pairs seen by this run's discovery (one chunk of
        a sitemap), in one set-based transaction: new rows are inserted due now, a
        changed lastmod makes a row due now, a row seen again is no longer missing
        and belongs to this run's seed. URLs that cannot be normalized are skipped.
        A *feed*'s rows never count as missing: a row it finds first is attached to
        it, one a sitemap lists stays with the sitemap. Returns how many were recorded."""
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
                db.execute(COUNT_FUTURE, (host, count))
            if sitemap_url is not None:
                # Known from now on, so its rows are checked for absence even if it is
                # never read whole (an empty digest matches no real one).
                db.execute(
                    "INSERT OR IGNORE INTO sitemaps (seed, url, digest, read_at, feed) "
                    "VALUES (:seed, :url, '', :now, :feed)",
                    {**params, "url": sitemap_url, "feed": feed},
                )
            db.execute("DELETE FROM temp.chunk")
            # One statement, not a step per row: SQLite then runs the whole chunk
            # without the GIL while discovery parses the next one.
            db.execute(_FILL_CHUNK, (json.dumps(list(rows.values())),))
            fresh, taken = listed_before(db, params)
            self.repeated += len(rows) - fresh
            self.taken_over.update(taken)
            if self.database.dialect != "sqlite":
                # Rows locked in key order, as a results batch locks them (fence):
                # a writer and discovery wait for each other, never in a circle.
                db.execute(_LOCK_CHUNK_ROWS)
            for statement in _APPLY_FEED_CHUNK if feed else _APPLY_CHUNK:
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
                db.executemany("UPDATE pages SET seen_run = ? WHERE normalized_url = ?", keys)

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
            "SELECT digest FROM sitemaps WHERE seed = ? AND url = ?", (self.seed, sitemap_url)
        ).fetchone()
        if row is None or row["digest"] != digest:
            return False
        with self.database.transaction() as db:
            db.execute("INSERT OR IGNORE INTO temp.unchanged VALUES (?)", (sitemap_url,))
            db.execute(
                "UPDATE sitemaps SET etag = ?, last_modified = ? WHERE seed = ? AND url = ?",
                (*validators, self.seed, sitemap_url),
            )
        return True

    @_step
    def sitemap_conditions(self, sitemap_url: str, settings: str) -> dict[str, str]:
        """Conditional request headers for *sitemap_url* from its last whole read,
        none when that read was under other *settings* (a digest of what changes
        what a sitemap yields: it must be read and applied again)."""
        row = self.database.execute(
            "SELECT etag, last_modified, settings FROM sitemaps WHERE seed = ? AND url = ?",
            (self.seed, sitemap_url),
        ).fetchone()
        if row is None or row["settings"] != settings:
            return {}
        headers = {"If-None-Match": row["etag"], "If-Modified-Since": row["last_modified"]}
        return {name: value for name, value in headers.items() if value}

    @_step
    def sitemap_not_modified(self, sitemap_url: str) -> None:
        """The server answered 304 to ``sitemap_conditions``: as unchanged."""
        # The run's own temp table: no lock on the database, no transaction needed.
        self.database.execute("INSERT OR IGNORE INTO temp.unchanged VALUES (?)", (sitemap_url,))

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
                db.execute(
                    "UPDATE pages SET sitemap_url = NULL WHERE sitemap_url = ? "
                    "AND seen_run IS NOT ?",
                    (sitemap_url, self.id),
                )
            db.execute(
                "INSERT INTO sitemaps (seed, url, digest, read_at, etag, last_modified, "
                "settings, feed) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (seed, url) DO UPDATE SET digest = excluded.digest, "
                "read_at = excluded.read_at, etag = excluded.etag, "
                "last_modified = excluded.last_modified, settings = excluded.settings, "
                "feed = excluded.feed",
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
            db.execute("DELETE FROM temp.missing")
            db.execute(_FIND_MISSING, params)
            due = db.execute(
                "SELECT count(*) FROM pages "
                "WHERE normalized_url IN (SELECT normalized_url FROM temp.missing) "
                "AND missing_runs + 1 = :n AND gone = 0",
                params,
            ).fetchone()[0]
            # A gone row no longer listed is counted too: it stops being re-checked.
            marked = db.execute(
                "UPDATE pages SET missing_runs = missing_runs + 1, next_check = CASE "
                "WHEN missing_runs + 1 = :n AND gone = 0 THEN min(next_check, :now) "
                "ELSE next_check END "
                "WHERE normalized_url IN (SELECT normalized_url FROM temp.missing)",
                params,
            ).rowcount
        return MissingResult(marked=marked, due=due)

    def finish(
        self,
        counts: dict[str, int],
        *,
        discovery_complete: bool | None,
        close_reason: str | None = None,
        listed: int | None = None,
    ) -> None:
        """Write the run's counts; results still pending are written first, and date
        moves the caller never judged (apply_lastmod) are judged now, not lost.
        *listed* is the seed's live pages at the end (what fetching them all costs)."""
        unknown = set(counts) - set(RUN_COUNTS)
        if unknown:
            raise ValueError(f"unknown run counts: {sorted(unknown)}")
        sets = "".join(f"{name} = :{name}, " for name in counts)
        with self.database.mutex:
            if (
                self.database.current_run is self
                and self.database.execute("SELECT 1 FROM temp.moves LIMIT 1").fetchone()
            ):
                self.apply_lastmod()
            self._settle()
            with self.database.transaction() as db:
                db.execute(
                    f"UPDATE runs SET {sets}finished_at = :now, "
                    "discovery_complete = :complete, close_reason = :reason, listed = :listed "
                    "WHERE id = :id",
                    {
                        **counts,
                        "now": self._clock(),
                        "complete": discovery_complete,
                        "reason": close_reason,
                        "listed": listed,
                        "id": self.id,
                    },
                )


#: Per-connection tables of the current run: the chunk being applied, lastmods that
#: moved, sitemaps found unchanged, and rows found missing.
_RUN_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS chunk (normalized_url TEXT PRIMARY KEY, url TEXT, "
    "lastmod TEXT, sitemap_url TEXT, host TEXT, future INTEGER) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS moves ("
    "normalized_url TEXT PRIMARY KEY, host TEXT, lastmod TEXT) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS waves (host TEXT, minute TEXT, PRIMARY KEY (host, minute)) "
    "WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS deaf (host TEXT PRIMARY KEY) WITHOUT ROWID",
    "DELETE FROM temp.moves",
    "CREATE TEMP TABLE IF NOT EXISTS unchanged (url TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS missing (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID",
    "DELETE FROM temp.chunk",
    "DELETE FROM temp.unchanged",
    "DELETE FROM temp.missing",
)

_FILL_CHUNK = (
    "INSERT INTO temp.chunk SELECT "
    + ", ".join(f"json_extract(value, '$[{column}]')" for column in range(6))
    + " FROM json_each(?)"
)

_APPLY_CHUNK = (
    # Rows whose lastmod moved: what that means is decided once discovery is over
    # (Run.apply_lastmod), when waves can be told from edits.
    """
    INSERT OR REPLACE INTO temp.moves
    SELECT c.normalized_url, c.host, c.lastmod FROM temp.chunk AS c
    JOIN pages AS p ON p.normalized_url = c.normalized_url
    WHERE p.sitemap_lastmod IS NOT NULL AND c.lastmod IS NOT NULL
      AND p.sitemap_lastmod != c.lastmod AND NOT c.future
    """,
    # Rows seen again are no longer missing, with their date as listed. Driven by the
    # chunk's keys (IN), so each is one primary-key lookup, never a scan.
    """
    UPDATE pages SET
        last_seen = :now,
        seen_run = :run,
        missing_runs = 0,
        sitemap_lastmod = coalesce(
            (SELECT c.lastmod FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url AND NOT c.future), sitemap_lastmod)
    WHERE normalized_url IN (SELECT normalized_url FROM temp.chunk)
    """,
    # They belong to this seed and this sitemap now: written only where that changes
    # (both columns are indexed; rewriting equal values costs three times the rest).
    """
    UPDATE pages SET
        seed = :seed,
        sitemap_url = coalesce(
            (SELECT c.sitemap_url FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url), sitemap_url)
    WHERE normalized_url IN (
        SELECT c.normalized_url FROM temp.chunk AS c
        JOIN pages AS p ON p.normalized_url = c.normalized_url
        WHERE p.seed IS NOT :seed
           OR (c.sitemap_url IS NOT NULL AND p.sitemap_url IS NOT c.sitemap_url))
    """,
    # Then rows discovery has never seen: due now, default interval.
    """
    INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, next_check,
                       interval_s, sitemap_lastmod, sitemap_url, host, seen_run)
    SELECT c.normalized_url, c.url, :seed, :now, :now, 0, :interval, c.lastmod, c.sitemap_url,
           c.host, :run
    FROM temp.chunk AS c
    WHERE NOT EXISTS (SELECT 1 FROM pages AS p WHERE p.normalized_url = c.normalized_url)
    ON CONFLICT (normalized_url) DO NOTHING
    """,
)
# (A row another worker inserted meanwhile, a result of a URL not yet discovered, is
# left as it is: the next discovery attaches it.)
_LOCK_CHUNK_ROWS = (
    "SELECT 1 FROM pages WHERE normalized_url IN (SELECT normalized_url FROM temp.chunk) "
    "ORDER BY normalized_url FOR UPDATE"
)

#: A feed's chunk: as a sitemap's, but a row a sitemap lists stays attached to it.
_APPLY_FEED_CHUNK = tuple(
    statement.replace(
        "coalesce(\n            (SELECT c.sitemap_url FROM temp.chunk AS c\n"
        "             WHERE c.normalized_url = pages.normalized_url), sitemap_url)",
        "coalesce(sitemap_url,\n            (SELECT c.sitemap_url FROM temp.chunk AS c\n"
        "             WHERE c.normalized_url = pages.normalized_url))",
    )
    for statement in _APPLY_CHUNK
)
assert _APPLY_FEED_CHUNK != _APPLY_CHUNK

_EAST_OF_UTC = 14 * 3600.0
_DAY_ONLY = "T00:00:00Z"  # how a date-only lastmod is stored


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Driven by the sitemaps that were read whole and changed (through pages_sitemap),
#: never a scan of the seed: an hourly run on a quiet site touches a few rows.
_FIND_MISSING = """
INSERT OR IGNORE INTO temp.missing
SELECT p.normalized_url FROM pages AS p INDEXED BY pages_sitemap
WHERE p.sitemap_url IS NULL AND +p.seed = :seed
  AND p.seen_run IS NOT :run
UNION ALL
SELECT p.normalized_url FROM sitemaps AS m CROSS JOIN pages AS p INDEXED BY pages_sitemap
  ON p.sitemap_url = m.url
WHERE m.seed = :seed AND +p.seed = :seed AND NOT m.feed
  AND NOT EXISTS (SELECT 1 FROM temp.unchanged AS u WHERE u.url = m.url)
  AND p.seen_run IS NOT :run
"""
