"""A state in one SQLite file: its one connection, shared by the store's parts
(opening, identity, migrations, transactions, the mutex every public method holds),
with SQLite's statements (``statements.py``); ``backend.Backend``'s SQLite side; and
the file's crawl lock, one crawl per database, beside it on every platform (filelock)."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock, Timeout

from increcrawl_scrapy.state.backend import Params
from increcrawl_scrapy.state.errors import StateError, StateLockedError
from increcrawl_scrapy.state.sqlite.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from increcrawl_scrapy.state.sqlite.statements import SQLiteStatements
from increcrawl_scrapy.state.statements import Statements

_T = TypeVar("_T")
#: One set of statements for every connection (they are constants).
STATEMENTS: Statements = SQLiteStatements()


class Database:
    """An open, checked and migrated state database."""

    dialect = "sqlite"
    sql = STATEMENTS

    def __init__(self, path: str, lock_timeout: float) -> None:
        self.path = path
        self.lock_timeout = lock_timeout
        # Reentrant: a facade method may call another part's serialized method.
        self.mutex = threading.RLock()
        self.connection = self._open()
        #: The run whose discovery tables the connection holds (runs.Run).
        self.current_run: object | None = None
        self.closed = False

    def _open(self) -> sqlite3.Connection:
        existed = Path(self.path).exists() and Path(self.path).stat().st_size > 0
        # One connection, used by one thread at a time: every public method of the
        # store's parts holds the mutex.
        db = sqlite3.connect(
            self.path, timeout=self.lock_timeout, isolation_level=None, check_same_thread=False
        )
        db.row_factory = sqlite3.Row
        try:
            self._check_identity(db, existed)
            with self.locked_errors():
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                # Bounded memory whatever the site's size: the run's scratch tables
                # (a deploy can move every lastmod at once) spill to a temporary
                # file, and the page cache is 16 MB (the OS caches the file anyway:
                # 64 MB made neither discovery nor recording faster at 1M rows).
                db.execute("PRAGMA temp_store=FILE")
                db.execute("PRAGMA cache_size=-16384")
                db.execute("PRAGMA temp.cache_size=-16384")  # a chunk's worth and more
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
        except sqlite3.OperationalError as exc:
            if not _is_locked(exc):
                raise self._not_ours(exc) from None
            raise self._locked() from None
        except sqlite3.DatabaseError as exc:
            raise self._not_ours(exc) from None
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

    def _not_ours(self, exc: sqlite3.DatabaseError) -> StateError:
        return StateError(
            f"{self.path} is not an increcrawl state database ({exc}); it was left "
            "untouched: move it away or point INCRECRAWL_DB at another file"
        )

    def _locked(self) -> StateLockedError:
        return StateLockedError(
            f"state database {self.path} is in use by another program (locked for more "
            f"than {self.lock_timeout:g}s, INCRECRAWL_DB_LOCK_TIMEOUT); wait for it to "
            "finish or point INCRECRAWL_DB at another file"
        )

    def check_writable(self) -> None:
        """StateLockedError unless a write could start now (within the lock timeout):
        another program may hold the file without the crawl lock."""
        with self.locked_errors():
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.execute("ROLLBACK")

    def _migrate(self, db: sqlite3.Connection) -> None:
        if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return  # the common case takes no write lock
        db.execute("BEGIN IMMEDIATE")
        try:
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for step in MIGRATIONS[version:]:
                for statement in step:  # one statement each: never split SQL by hand
                    db.execute(statement)
            if version < SCHEMA_VERSION:
                db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @contextlib.contextmanager
    def locked_errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.OperationalError as exc:
            if _is_locked(exc):
                raise self._locked() from None
            raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        with self.locked_errors():
            self.connection.execute("BEGIN IMMEDIATE")
            try:
                yield self
            except BaseException:
                self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")

    def tuples(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        """A cursor of plain tuples (rows are built into PageState directly)."""
        cursor = self.connection.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params)

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> sqlite3.Cursor:
        return self.connection.executemany(sql, rows)

    def fill(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # One JSON parameter: SQLite runs the whole statement without the GIL.
        self.connection.execute(sql, (json.dumps(rows),))

    def retrying(self, work: Callable[[], _T]) -> _T:
        return work()  # a file does not drop

    def fence(self, leased: Mapping[str, int], keep: set[str]) -> set[str]:
        raise TypeError("a SQLite state has one crawl: it leases nothing")

    def close(self) -> None:
        # Under the mutex: a worker thread may be inside a statement (the crawl's end
        # closes on the reactor's thread), and closing the connection under it is a
        # segmentation fault. Its next statement then fails, as on any closed file.
        with self.mutex:
            if not self.closed:
                self.closed = True
                self.current_run = None
                self.connection.close()


class ReadOnly:
    """A read-only connection to a state file (the operator's commands): ``mode=ro``
    works on a read-only file and never creates one."""

    sql = STATEMENTS

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self.connection.row_factory = sqlite3.Row

    def execute(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        return self.connection.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Params]) -> sqlite3.Cursor:
        return self.connection.executemany(sql, rows)

    def fill(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # One JSON parameter: SQLite runs the whole statement without the GIL.
        self.connection.execute(sql, (json.dumps(rows),))

    def tuples(self, sql: str, params: Params = ()) -> sqlite3.Cursor:
        cursor = self.connection.cursor()
        cursor.row_factory = None
        return cursor.execute(sql, params)

    def schema_version(self) -> int:
        """The file's schema version (a command reading what a later one added can
        say the file is behind instead of failing on a missing table)."""
        return int(self.connection.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self.connection.close()


def _is_locked(exc: sqlite3.OperationalError) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def resolved(path: str | os.PathLike[str]) -> str:
    """The file a path names, symlinks resolved: one database, one lock."""
    return os.path.realpath(path)


class CrawlLock:
    """Held for a crawl's whole life. A second crawl on the same file (by any path:
    symlinks are resolved) stops at once with the holder's process id."""

    def __init__(self, path: str) -> None:
        self.path = path
        base = resolved(path)
        self._holder = Path(base + ".lock.pid")  # who holds it, for the message
        self._lock = FileLock(base + ".lock", timeout=0)

    def acquire(self) -> CrawlLock:
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            holder = "unknown"
            with contextlib.suppress(OSError):
                holder = self._holder.read_text().strip() or holder
            raise StateLockedError(
                f"state database {self.path} is in use by another crawl (pid {holder}); "
                "wait for it to finish or point INCRECRAWL_DB at another file"
            ) from None
        with contextlib.suppress(OSError):
            self._holder.write_text(str(os.getpid()))
        return self

    def release(self) -> None:
        if self._lock.is_locked:
            with contextlib.suppress(OSError):
                self._holder.unlink()
            self._lock.release(force=True)
