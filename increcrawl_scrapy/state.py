"""Per-URL crawl state in SQLite. The only module of the package that speaks SQL.

Rows are keyed by normalized URL. Fetch results are buffered and written in one
transaction per flush (by count or by elapsed time, and on close), never one
commit per row. Time comes from an injected clock so tests and the simulator can
move it.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import operator
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from increcrawl_scrapy.schedule import Outcome, RevisitPolicy, classify
from increcrawl_scrapy.urls import RULES_VERSION, normalization_settings, normalize_url

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

logger = logging.getLogger(__name__)

#: "ICCR": marks a file as an increcrawl state database.
APPLICATION_ID = 0x49434352

#: Forward migrations; migration ``i`` takes ``user_version`` from ``i`` to ``i + 1``.
MIGRATIONS: tuple[str, ...] = (
    # 1: the pages and runs tables of DESIGN section 5.
    """
    CREATE TABLE pages (
        id              INTEGER PRIMARY KEY,  -- rows append in discovery order
        normalized_url  TEXT NOT NULL UNIQUE,
        url             TEXT NOT NULL,
        seed            TEXT NOT NULL,
        first_seen      REAL NOT NULL,
        last_seen       REAL,
        last_fetched    REAL,
        next_check      REAL NOT NULL DEFAULT 0,
        interval_s      REAL NOT NULL,
        content_hash    TEXT,
        etag            TEXT,
        last_modified   TEXT,
        sitemap_lastmod TEXT,
        missing_runs    INTEGER NOT NULL DEFAULT 0,
        gone            INTEGER NOT NULL DEFAULT 0,
        last_status     INTEGER,
        last_changed    REAL,
        change_count    INTEGER NOT NULL DEFAULT 0,
        fetch_count     INTEGER NOT NULL DEFAULT 0,
        error_count     INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE runs (
        id                 INTEGER PRIMARY KEY,
        seed               TEXT NOT NULL,
        started_at         REAL NOT NULL,
        finished_at        REAL,
        discovered         INTEGER NOT NULL DEFAULT 0,
        new                INTEGER NOT NULL DEFAULT 0,
        changed            INTEGER NOT NULL DEFAULT 0,
        unchanged          INTEGER NOT NULL DEFAULT 0,
        gone               INTEGER NOT NULL DEFAULT 0,
        errors             INTEGER NOT NULL DEFAULT 0,
        api_requests       INTEGER NOT NULL DEFAULT 0,
        tokens_charged     INTEGER NOT NULL DEFAULT 0,
        discovery_complete INTEGER
    );
    """,
    # 2: the child sitemap that lists a row, digests of sitemaps read whole (an
    # identical one is not read again), the queue index, the run's due count and
    # close reason.
    """
    ALTER TABLE pages ADD COLUMN sitemap_url TEXT;
    CREATE INDEX pages_queue ON pages (seed, gone, next_check);
    CREATE INDEX pages_sitemap ON pages (sitemap_url);
    CREATE TABLE sitemaps (
        seed    TEXT NOT NULL,
        url     TEXT NOT NULL,
        digest  TEXT NOT NULL,
        read_at REAL NOT NULL,
        PRIMARY KEY (seed, url)
    ) WITHOUT ROWID;
    ALTER TABLE runs ADD COLUMN due INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE runs ADD COLUMN close_reason TEXT;
    """,
    # 3: consecutive site errors (they back off), the URL a redirect ended on, and
    # the settings the stored keys were made under (normalization).
    """
    ALTER TABLE pages ADD COLUMN error_streak INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE pages ADD COLUMN final_url TEXT;
    CREATE TABLE settings (
        name  TEXT PRIMARY KEY,
        value TEXT NOT NULL
    ) WITHOUT ROWID;
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)

#: Columns a fetch result writes; discovery writes the others.
_RESULT_COLUMNS = (
    "last_fetched",
    "next_check",
    "interval_s",
    "content_hash",
    "etag",
    "last_modified",
    "gone",
    "last_status",
    "last_changed",
    "change_count",
    "fetch_count",
    "error_count",
    "error_streak",
    "final_url",
)
#: A run's counts that are ``increcrawl/<name>`` stats of the crawl...
CRAWL_COUNTS = ("discovered", "new", "changed", "unchanged", "gone", "errors", "due")
#: ...and all of them, API usage included.
RUN_COUNTS = (*CRAWL_COUNTS, "api_requests", "tokens_charged")


_F = TypeVar("_F", bound=Callable[..., Any])


def _serialized(method: _F) -> _F:
    @functools.wraps(method)
    def wrapper(self: StateStore, *args: Any, **kwargs: Any) -> Any:
        with self._mutex:
            return method(self, *args, **kwargs)

    return cast("_F", wrapper)


class StateError(RuntimeError):
    """The state database cannot be used; the message says why and what to do."""


class StateLockedError(StateError):
    """Another process holds the database longer than the lock timeout."""


class PageState(NamedTuple):
    """One row of ``pages`` (a tuple: cheap to build from a row and to update)."""

    normalized_url: str
    url: str
    seed: str
    first_seen: float
    last_seen: float | None
    last_fetched: float | None
    next_check: float
    interval_s: float
    content_hash: str | None
    etag: str | None
    last_modified: str | None
    sitemap_lastmod: str | None
    missing_runs: int
    gone: bool
    last_status: int | None
    last_changed: float | None
    change_count: int
    fetch_count: int
    error_count: int
    sitemap_url: str | None = None
    error_streak: int = 0
    final_url: str | None = None

    @property
    def has_validators(self) -> bool:
        return bool(self.etag or self.last_modified)


_PAGE_COLUMNS = PageState._fields
_GONE = _PAGE_COLUMNS.index("gone")
_SELECT_PAGE = ", ".join(_PAGE_COLUMNS)


@dataclass(frozen=True)
class Recorded:
    """What :meth:`StateStore.record` decided, and the row as it now stands."""

    outcome: Outcome
    page: PageState


@dataclass(frozen=True)
class RekeyResult:
    rekeyed: int  # rows whose key changed
    merged: int  # rows dropped because another row has the same key under the new rules


@dataclass(frozen=True)
class MissingResult:
    marked: int  # rows of the seed absent this run
    due: int  # of which reached INCRECRAWL_MISSING_RUNS and are due for a confirming fetch


class StateStore:
    """SQLite state for one database file. Not thread-safe: one owner at a time."""

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
        exclusive: bool = False,
        normalize: Callable[[str], str] = normalize_url,
        normalization: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = str(path)
        self.policy = policy or RevisitPolicy()
        self.clock = clock
        self.missing_runs = missing_runs
        self.flush_items = flush_items
        self.flush_seconds = flush_seconds
        self.lock_timeout = lock_timeout
        self.normalize = normalize
        self._pending: dict[str, PageState] = {}
        self._new_keys: set[str] = set()
        self._queued: dict[str, PageState] = {}  # rows handed out by due(), not yet recorded
        self._last_flush = time.monotonic()
        self._run_seeds: dict[int, str] = {}
        self._lock_file: Any = None
        self._mutex = threading.RLock()
        if exclusive:
            self._lock_file = self._take_crawl_lock()
        self._db = self._open()
        #: Rows merged by the last re-keying (normalization settings changed).
        self.rekeyed = RekeyResult(0, 0)
        if normalization is not None:
            try:
                self.rekeyed = self._check_normalization(normalization)
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
    ) -> StateStore:
        return cls(
            config.db_path,
            policy=RevisitPolicy.from_config(config),
            clock=clock or config.clock,
            missing_runs=config.missing_runs,
            flush_items=config.flush_items,
            flush_seconds=config.flush_seconds,
            lock_timeout=config.db_lock_timeout,
            exclusive=exclusive,
            normalize=partial(normalize_url, **normalization_settings(config)),
            normalization={**normalization_settings(config), "rules": RULES_VERSION},
        )

    # -- opening -------------------------------------------------------------

    def _take_crawl_lock(self) -> Any:
        # Advisory lock beside the database: a second crawl on it stops at once
        # with a message instead of fetching the same due rows twice.
        # The resolved path: a symlink to the same file must take the same lock.
        lock_path = os.path.realpath(self.path) + ".lock"
        handle = open(lock_path, "a+")  # noqa: SIM115 - held open for the store's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise StateLockedError(
                f"state database {self.path} is in use by another crawl (pid {holder}); "
                "wait for it to finish or point INCRECRAWL_DB at another file"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        return handle

    def _open(self) -> sqlite3.Connection:
        existed = Path(self.path).exists() and Path(self.path).stat().st_size > 0
        # One connection, used by one thread at a time (the reactor, or a worker
        # thread during discovery): _serialized guards every public method.
        db = sqlite3.connect(
            self.path, timeout=self.lock_timeout, isolation_level=None, check_same_thread=False
        )
        db.row_factory = sqlite3.Row
        try:
            self._check_identity(db, existed)
            with self._locked_errors():
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                # The run's scratch tables live in memory; a bigger page cache (64 MB)
                # keeps the working set of large seeds off the disk.
                db.execute("PRAGMA temp_store=MEMORY")
                db.execute("PRAGMA cache_size=-65536")
                # Fewer, larger checkpoints (40 MB of WAL): each one syncs the disk.
                db.execute("PRAGMA wal_autocheckpoint=10000")
                self._migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _check_identity(self, db: sqlite3.Connection, existed: bool) -> None:
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            app_id = db.execute("PRAGMA application_id").fetchone()[0]
            tables = db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StateError(
                f"{self.path} is not an increcrawl state database ({exc}); it was left "
                "untouched: move it away or point INCRECRAWL_DB at another file"
            ) from None
        if existed and (app_id != APPLICATION_ID and (tables or version)):
            raise StateError(
                f"{self.path} is an SQLite database of another program; it was left "
                "untouched: point INCRECRAWL_DB at another file"
            )
        if version > SCHEMA_VERSION:
            raise StateError(
                f"{self.path} has schema version {version}, newer than this "
                f"increcrawl-scrapy understands ({SCHEMA_VERSION}); upgrade the package"
            )

    def _migrate(self, db: sqlite3.Connection) -> None:
        if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return  # the common case takes no write lock
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for number in range(version, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[number]):
                    db.execute(statement)
            if version < SCHEMA_VERSION:
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _check_normalization(self, settings: Mapping[str, Any]) -> RekeyResult:
        """Keys are normalized URLs: when the normalization settings change, every
        row is re-keyed under the new rules in one transaction, so results land on
        the rows the queue hands out and no URL is split across two rows."""
        wanted = json.dumps(dict(settings), sort_keys=True)
        row = self._db.execute("SELECT value FROM settings WHERE name = 'normalization'").fetchone()
        if row is not None and row["value"] == wanted:
            return RekeyResult(0, 0)
        with self._transaction() as db:
            result = RekeyResult(0, 0) if row is None else _rekey(db, self.normalize)
            db.execute(
                "INSERT INTO settings (name, value) VALUES ('normalization', ?) "
                "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
                (wanted,),
            )
        if result.rekeyed:
            logger.warning(
                "URL normalization settings changed (%s): %d rows re-keyed, %d merged "
                "into the row of the same URL under the new rules",
                wanted,
                result.rekeyed,
                result.merged,
            )
        return result

    @contextlib.contextmanager
    def _locked_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StateLockedError(
                    f"state database {self.path} stayed locked by another process for "
                    f"more than {self.lock_timeout:g}s (INCRECRAWL_DB_LOCK_TIMEOUT); is "
                    "another crawl using it?"
                ) from None
            raise

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._locked_errors():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- runs ----------------------------------------------------------------

    @_serialized
    def start_run(self, seed: str) -> int:
        """Record a new run of *seed*. Its discovery must happen on this store:
        what the run has seen is kept in this connection's temporary tables."""
        with self._transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (seed, started_at) VALUES (?, ?)", (seed, self.clock())
            )
            for statement in _statements(_RUN_TABLES):
                db.execute(statement)
        run_id = int(cursor.lastrowid or 0)
        self._run_seeds[run_id] = seed
        return run_id

    @_serialized
    def finish_run(
        self,
        run_id: int,
        counts: dict[str, int],
        *,
        discovery_complete: bool | None,
        close_reason: str | None = None,
    ) -> None:
        self.flush()
        unknown = set(counts) - set(RUN_COUNTS)
        if unknown:
            raise ValueError(f"unknown run counts: {sorted(unknown)}")
        sets = ", ".join(f"{name} = :{name}" for name in counts)
        sets = f"{sets}, " if sets else ""
        with self._transaction() as db:
            db.execute(
                f"UPDATE runs SET {sets}finished_at = :now, discovery_complete = :complete, "
                "close_reason = :reason WHERE id = :id",
                {
                    **counts,
                    "now": self.clock(),
                    "complete": discovery_complete,
                    "reason": close_reason,
                    "id": run_id,
                },
            )

    @_serialized
    def runs(self, seed: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT * FROM runs" + (" WHERE seed = ?" if seed else "") + " ORDER BY id"
        return [dict(row) for row in self._db.execute(query, (seed,) if seed else ())]

    def _seed_of(self, run_id: int) -> str:
        if run_id not in self._run_seeds:
            row = self._db.execute("SELECT seed FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                raise ValueError(f"no run {run_id}")
            self._run_seeds[run_id] = row["seed"]
        return self._run_seeds[run_id]

    # -- discovery -----------------------------------------------------------

    @_serialized
    def upsert_discovered(
        self,
        run_id: int,
        entries: Iterable[tuple[str, str | None]],
        *,
        sitemap_url: str | None = None,
    ) -> int:
        """Record ``(url, lastmod)`` pairs seen by this run's discovery (one chunk of
        a sitemap), in one set-based transaction: new rows are inserted due now, a
        changed lastmod makes a row due now, a row seen again is no longer missing.
        URLs that cannot be normalized are skipped. Returns how many were recorded."""
        self.flush()  # pending results must not overwrite what discovery decides
        self._queued.clear()  # discovery may change queued rows
        self._check_discovery_run(run_id)
        rows: dict[str, tuple[str, str, str | None, str | None]] = {}
        for url, lastmod in entries:
            try:
                key = self.normalize(url)
            except ValueError:
                continue
            rows.setdefault(key, (key, url, lastmod, sitemap_url))  # first spelling wins
        if not rows:
            return 0
        params = {
            "seed": self._seed_of(run_id),
            "now": self.clock(),
            "interval": self.policy.default_interval,
        }
        with self._transaction() as db:
            if sitemap_url is not None:
                # Known from now on, so its rows are checked for absence even if it is
                # never read whole (an empty digest matches no real one).
                db.execute(
                    "INSERT OR IGNORE INTO sitemaps (seed, url, digest, read_at) "
                    "VALUES (:seed, :url, '', :now)",
                    {**params, "url": sitemap_url},
                )
            db.execute("DELETE FROM temp.chunk")
            db.executemany("INSERT INTO temp.chunk VALUES (?, ?, ?, ?)", rows.values())
            for statement in _APPLY_CHUNK:
                db.execute(statement, params)
        return len(rows)

    @_serialized
    def sitemap_unchanged(self, run_id: int, sitemap_url: str, digest: str) -> bool:
        """Whether *sitemap_url* is exactly what this seed read last time. If so the
        caller need not read it again: its rows stay as they are and are not missing."""
        self._check_discovery_run(run_id)
        row = self._db.execute(
            "SELECT digest FROM sitemaps WHERE seed = ? AND url = ?",
            (self._seed_of(run_id), sitemap_url),
        ).fetchone()
        if row is None or row["digest"] != digest:
            return False
        with self._transaction() as db:
            db.execute("INSERT OR IGNORE INTO temp.unchanged VALUES (?)", (sitemap_url,))
        return True

    @_serialized
    def sitemap_read(self, run_id: int, sitemap_url: str, digest: str) -> None:
        """*sitemap_url* was read whole this run: remember its digest. Rows it
        listed before and no longer lists are no longer attached to it."""
        with self._transaction() as db:
            db.execute(
                "UPDATE pages SET sitemap_url = NULL WHERE sitemap_url = ? "
                "AND normalized_url NOT IN temp.seen",
                (sitemap_url,),
            )
            db.execute(
                "INSERT INTO sitemaps (seed, url, digest, read_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (seed, url) DO UPDATE SET digest = excluded.digest, "
                "read_at = excluded.read_at",
                (self._seed_of(run_id), sitemap_url, digest, self.clock()),
            )

    @_serialized
    def mark_missing(self, run_id: int) -> MissingResult:
        """After a complete discovery: rows of the run's seed it did not see (and
        that no unchanged sitemap lists) get ``missing_runs + 1``; those reaching
        the threshold become due now. Absence never marks a row gone."""
        self.flush()
        self._queued.clear()
        self._check_discovery_run(run_id)
        params = {
            "seed": self._seed_of(run_id),
            "now": self.clock(),
            "n": self.missing_runs,
        }
        with self._transaction() as db:
            db.execute("DELETE FROM temp.missing")
            db.execute(_FIND_MISSING, params)
            due = db.execute(
                "SELECT count(*) FROM pages WHERE normalized_url IN temp.missing "
                "AND missing_runs + 1 = :n AND gone = 0",
                params,
            ).fetchone()[0]
            marked = db.execute(
                # A gone row no longer listed is counted too: it stops being re-checked.
                "UPDATE pages SET missing_runs = missing_runs + 1, next_check = CASE "
                "WHEN missing_runs + 1 = :n AND gone = 0 THEN min(next_check, :now) "
                "ELSE next_check END "
                "WHERE normalized_url IN temp.missing",
                params,
            ).rowcount
        return MissingResult(marked=marked, due=due)

    def _check_discovery_run(self, run_id: int) -> None:
        if run_id != max(self._run_seeds, default=None):
            raise ValueError(
                f"run {run_id} was not started on this store (or a later run was): "
                "discovery must follow start_run() on the same StateStore"
            )

    # -- the change queue ----------------------------------------------------

    @_serialized
    def due(self, seed: str, limit: int | None = None) -> list[PageState]:
        """Rows of *seed* whose next check has come, most overdue first: live rows,
        and gone rows still listed (their slow re-check)."""
        self.flush()
        rows = self._tuples(
            f"SELECT {_SELECT_PAGE} FROM pages "
            "WHERE seed = :seed AND next_check <= :now AND (gone = 0 OR missing_runs = 0) "
            "ORDER BY next_check, normalized_url LIMIT :limit",
            {"seed": seed, "now": self.clock(), "limit": limit if limit else -1},
        )
        pages = [_page(row) for row in rows]
        if len(self._queued) + len(pages) <= _QUEUE_CACHE:
            # The crawl records these next: keep them, so recording needs no lookup.
            self._queued.update((page.normalized_url, page) for page in pages)
        return pages

    @_serialized
    def get(self, url: str) -> PageState | None:
        """The current state of *url* (normalized here), pending results included."""
        return self._lookup(self.normalize(url))

    def _lookup(self, key: str) -> PageState | None:
        if key in self._pending:
            return self._pending[key]
        if key in self._queued:
            return self._queued[key]
        row = self._tuples(_GET_PAGE, (key,)).fetchone()
        return _page(row) if row else None

    def _tuples(self, sql: str, params: Any) -> sqlite3.Cursor:
        cursor = self._db.cursor()
        cursor.row_factory = None  # plain tuples: PageState is built from them directly
        return cursor.execute(sql, params)

    @_serialized
    def count(self, seed: str | None = None, **where: Any) -> int:
        """How many rows match; *where* names columns (``gone=True``)."""
        clauses = [f"{name} IS ?" for name in where if name in _PAGE_COLUMNS]
        if len(clauses) != len(where):
            raise ValueError(f"unknown columns in {sorted(where)}")
        params = list(where.values())
        if seed is not None:
            clauses.append("seed = ?")
            params.append(seed)
        sql = "SELECT count(*) FROM pages" + (" WHERE " + " AND ".join(clauses) if clauses else "")
        self.flush()
        return int(self._db.execute(sql, params).fetchone()[0])

    # -- fetch results -------------------------------------------------------

    @_serialized
    def record(
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
    ) -> Recorded:
        """Buffer the result of fetching *url* and return what it meant.

        *key* is the row's key as the queue handed it out (so a result always lands
        on the row that was due); without it *url* is normalized. *status* is the
        origin's HTTP status, or None for a network or API failure. A failure with
        *site_failure* (the site answered 4xx/5xx or timed out) backs the row off;
        any other failure leaves it due. *validators* is ``(etag, last_modified)``
        as the origin sent them; None means the fetcher cannot see them (Geonode).
        """
        key = key or self.normalize(url)
        now = self.clock()
        previous = self._lookup(key)
        self._queued.pop(key, None)  # from now on the pending result is the row
        if previous is None:
            self._new_keys.add(key)  # a URL discovery never saw: inserted on flush
        outcome = classify(
            status if status is not None else 0,
            previous_hash=previous.content_hash if previous else None,
            new_hash=content_hash,
            fetched_before=bool(previous and previous.last_fetched is not None),
            was_gone=bool(previous and previous.gone),
        )
        page = previous or _new_page(key, url, seed, now, self.policy.default_interval)
        page = _apply(
            page,
            _Result(outcome, status, content_hash, validators, site_failure, final_url),
            now,
            self.policy,
        )
        self._pending[key] = page
        if (
            len(self._pending) >= self.flush_items
            or time.monotonic() - self._last_flush >= self.flush_seconds
        ):
            self.flush()
        return Recorded(outcome=outcome, page=page)

    @_serialized
    def flush(self) -> int:
        """Write buffered results in one transaction. Returns how many rows."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return 0
        pending = list(self._pending.values())
        new = [p for p in pending if p.normalized_url in self._new_keys]
        with self._transaction() as db:
            if new:
                db.executemany(_INSERT_RESULT, [_insert_values(p) for p in new])
            db.executemany(
                _UPDATE_RESULT,
                [_update_values(p) for p in pending if p.normalized_url not in self._new_keys],
            )
        self._pending.clear()
        self._new_keys.clear()
        return len(pending)

    @_serialized
    def close(self) -> None:
        """Flush and close; safe to call twice."""
        if self._db is None:
            return
        try:
            self.flush()
        finally:
            self._db.close()
            self._db = None  # type: ignore[assignment]
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _rekey(db: sqlite3.Connection, normalize: Callable[[str], str]) -> RekeyResult:
    """Re-key every row with *normalize*; where two rows meet, the one fetched (then
    seen) most recently stays."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS rekey (id INTEGER PRIMARY KEY, new_key TEXT)")
    db.execute("DELETE FROM temp.rekey")
    moving: list[tuple[int, str]] = []
    for row_id, key, url in db.execute("SELECT id, normalized_url, url FROM pages").fetchall():
        try:
            new_key = normalize(url)
        except ValueError:
            continue  # not a URL under the new rules either: keep its key
        if new_key != key:
            moving.append((row_id, new_key))
    db.executemany("INSERT INTO temp.rekey VALUES (?, ?)", moving)
    db.execute("CREATE INDEX IF NOT EXISTS temp.rekey_new ON rekey (new_key)")
    merged = db.execute(_MERGE_COLLISIONS).rowcount
    db.execute(
        "UPDATE pages SET normalized_url = char(0) || id WHERE id IN (SELECT id FROM temp.rekey)"
    )
    db.execute(
        "UPDATE pages SET normalized_url = "
        "(SELECT r.new_key FROM temp.rekey AS r WHERE r.id = pages.id) "
        "WHERE id IN (SELECT id FROM temp.rekey)"
    )
    db.execute("DROP TABLE temp.rekey")
    return RekeyResult(rekeyed=len(moving), merged=max(0, merged))


#: Rows that end on the same key: all but the most recent one go.
_MERGE_COLLISIONS = """
DELETE FROM pages WHERE id IN (
    SELECT id FROM (
        SELECT p.id, row_number() OVER (
            PARTITION BY coalesce(r.new_key, p.normalized_url)
            ORDER BY coalesce(p.last_fetched, 0) DESC, coalesce(p.last_seen, 0) DESC,
                     r.id IS NULL DESC, p.id
        ) AS rank
        FROM pages AS p LEFT JOIN temp.rekey AS r ON r.id = p.id
        WHERE p.id IN (SELECT id FROM temp.rekey)
           OR p.normalized_url IN (SELECT new_key FROM temp.rekey)
    ) WHERE rank > 1
)
"""


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


def _page(row: tuple[Any, ...]) -> PageState:
    values = list(row)
    values[_GONE] = bool(values[_GONE])
    return PageState._make(values)


def _new_page(key: str, url: str, seed: str, now: float, interval: float) -> PageState:
    # A result for a URL discovery never saw (an embedding project's own spider).
    return PageState(
        normalized_url=key,
        url=url,
        seed=seed,
        first_seen=now,
        last_seen=None,
        last_fetched=None,
        next_check=0.0,
        interval_s=interval,
        content_hash=None,
        etag=None,
        last_modified=None,
        sitemap_lastmod=None,
        missing_runs=0,
        gone=False,
        last_status=None,
        last_changed=None,
        change_count=0,
        fetch_count=0,
        error_count=0,
    )


class _Result(NamedTuple):
    outcome: Outcome
    status: int | None
    content_hash: str | None
    validators: tuple[str | None, str | None] | None
    site_failure: bool
    final_url: str | None


def _apply(page: PageState, result: _Result, now: float, policy: RevisitPolicy) -> PageState:
    """The row after a fetch result (README "How it works", step 7)."""
    outcome, status = result.outcome, result.status
    if outcome is Outcome.ERROR:
        changes: dict[str, Any] = {
            "error_count": page.error_count + 1,
            "last_status": status if status else page.last_status,
        }
        if result.site_failure:
            # The site failed this page: wait longer after each failure in a row,
            # so a page that always fails never takes the place of the others.
            streak = page.error_streak + 1
            changes.update(error_streak=streak, next_check=now + policy.error_backoff(streak))
        return page._replace(**changes)
    changes = {
        "last_fetched": now,
        "last_status": status,
        "fetch_count": page.fetch_count + 1,
        "error_streak": 0,
        "final_url": result.final_url,
    }
    if outcome in (Outcome.GONE, Outcome.STILL_GONE):
        # Re-checked slowly while it is still listed; back as new if it answers.
        interval = policy.gone_recheck(page.interval_s, page.gone)
        changes.update(gone=True, interval_s=interval, next_check=now + interval)
        if outcome is Outcome.GONE:
            changes.update(last_changed=now, change_count=page.change_count + 1)
        return page._replace(**changes)
    interval = policy.next_interval(page.interval_s, outcome)
    changes.update(interval_s=interval, next_check=now + interval, gone=False)
    if outcome in (Outcome.NEW, Outcome.CHANGED):
        changes.update(content_hash=result.content_hash, last_changed=now)
    if outcome is Outcome.CHANGED:
        changes["change_count"] = page.change_count + 1
    if result.validators is not None:
        etag, last_modified = result.validators
        if outcome is Outcome.NOT_MODIFIED:
            # A 304 need not repeat the validators (RFC 9110): keep the stored ones.
            etag, last_modified = etag or page.etag, last_modified or page.last_modified
        changes.update(etag=etag, last_modified=last_modified)
    elif outcome in (Outcome.NEW, Outcome.CHANGED):
        # The fetcher cannot see validators (Geonode) and the content moved on:
        # the stored ones describe older content, and a 304 to them would hide a
        # revert. They are not sent again until a direct fetch refreshes them.
        changes.update(etag=None, last_modified=None)
    return page._replace(**changes)


#: Per-connection tables of the current run: the chunk being applied, every URL
#: seen, sitemaps found unchanged, and rows found missing.
_RUN_TABLES = """
CREATE TEMP TABLE IF NOT EXISTS chunk (
    normalized_url TEXT PRIMARY KEY, url TEXT, lastmod TEXT, sitemap_url TEXT
) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS seen (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS unchanged (url TEXT PRIMARY KEY) WITHOUT ROWID;
CREATE TEMP TABLE IF NOT EXISTS missing (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID;
DELETE FROM temp.chunk;
DELETE FROM temp.seen;
DELETE FROM temp.unchanged;
DELETE FROM temp.missing
"""

_APPLY_CHUNK = (
    # Rows seen again belong to this seed now; a changed lastmod makes one due now
    # (a gone one too: it may be back). Driven
    # by the chunk's keys (IN), so each is one primary-key lookup, never a scan.
    """
    UPDATE pages SET
        seed = :seed,
        last_seen = :now,
        missing_runs = 0,
        sitemap_url = coalesce(
            (SELECT c.sitemap_url FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url), sitemap_url),
        next_check = CASE
            WHEN sitemap_lastmod IS NOT NULL AND sitemap_lastmod != coalesce(
                (SELECT c.lastmod FROM temp.chunk AS c
                 WHERE c.normalized_url = pages.normalized_url), sitemap_lastmod)
                THEN min(next_check, :now)
            ELSE next_check END,
        sitemap_lastmod = coalesce(
            (SELECT c.lastmod FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url), sitemap_lastmod)
    WHERE normalized_url IN (SELECT normalized_url FROM temp.chunk)
    """,
    # Then rows discovery has never seen: due now, default interval.
    """
    INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, next_check,
                       interval_s, sitemap_lastmod, sitemap_url)
    SELECT c.normalized_url, c.url, :seed, :now, :now, 0, :interval, c.lastmod, c.sitemap_url
    FROM temp.chunk AS c
    WHERE NOT EXISTS (SELECT 1 FROM pages AS p WHERE p.normalized_url = c.normalized_url)
    """,
    "INSERT OR IGNORE INTO temp.seen SELECT normalized_url FROM temp.chunk",
)

_FIND_MISSING = """
INSERT OR IGNORE INTO temp.missing
SELECT p.normalized_url FROM pages AS p
WHERE p.sitemap_url IS NULL AND p.seed = :seed
  AND NOT EXISTS (SELECT 1 FROM temp.seen AS s WHERE s.normalized_url = p.normalized_url)
UNION ALL
SELECT p.normalized_url FROM sitemaps AS m JOIN pages AS p ON p.sitemap_url = m.url
WHERE m.seed = :seed AND p.seed = :seed
  AND NOT EXISTS (SELECT 1 FROM temp.unchanged AS u WHERE u.url = m.url)
  AND NOT EXISTS (SELECT 1 FROM temp.seen AS s WHERE s.normalized_url = p.normalized_url)
"""

_RESULT_INSERT = ("normalized_url", "url", "seed", "first_seen", *_RESULT_COLUMNS)
_INSERT_RESULT = (
    f"INSERT INTO pages ({', '.join(_RESULT_INSERT)}) "
    f"VALUES ({', '.join('?' for _ in _RESULT_INSERT)})"
)
_UPDATE_RESULT = (
    "UPDATE pages SET "
    + ", ".join(f"{c} = ?" for c in _RESULT_COLUMNS)
    + " WHERE normalized_url = ?"
)
_insert_values = operator.itemgetter(*(_PAGE_COLUMNS.index(c) for c in _RESULT_INSERT))
_update_values = operator.itemgetter(
    *(_PAGE_COLUMNS.index(c) for c in (*_RESULT_COLUMNS, "normalized_url"))
)
_QUEUE_CACHE = 200_000  # rows of due() kept for record(), at most
_GET_PAGE = f"SELECT {_SELECT_PAGE} FROM pages WHERE normalized_url = ?"
