"""A state on PostgreSQL (``postgresql://...``): ``backend.Backend``'s PostgreSQL
side, with PostgreSQL's statements (``statements.py``), so every part of the store
runs unchanged on it. One connection, used by one thread at a time (the store's
mutex), in autocommit mode outside ``transaction()``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from increcrawl_scrapy.state.backend import Params
from increcrawl_scrapy.state.errors import StateError
from increcrawl_scrapy.state.locations import shown
from increcrawl_scrapy.state.postgres import leases
from increcrawl_scrapy.state.postgres import schema as pg_schema
from increcrawl_scrapy.state.postgres.statements import PostgresStatements
from increcrawl_scrapy.state.statements import Statements

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
#: One set of statements for every connection (they are constants).
STATEMENTS: Statements = PostgresStatements()


class Row(tuple):
    """A row read by position or by column name, as sqlite3.Row."""

    names: dict[str, int]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self.names[key])
        return super().__getitem__(key)

    def keys(self) -> list[str]:  # dict(row), as with sqlite3.Row
        return list(self.names)


def _rows(cursor: Any) -> Any:
    names = {column.name: at for at, column in enumerate(cursor.description or ())}
    kind = type("Row", (Row,), {"names": names})
    return lambda values: kind(values)


def _plain(params: Any) -> Any:
    """Parameters as the schema stores them: flags are 0/1 integers."""
    if isinstance(params, dict):
        return {
            name: int(value) if isinstance(value, bool) else value for name, value in params.items()
        }
    return [_plain_value(value) for value in params]


def _plain_value(value: Any) -> Any:
    return int(value) if isinstance(value, bool) else value


class Connection:
    """Statements on one psycopg connection (``backend.Session``)."""

    sql = STATEMENTS

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def execute(self, sql: str, params: Params = ()) -> Any:
        cursor = self.raw.cursor(row_factory=_rows)
        return cursor.execute(sql, _plain(params) if params else None)

    def executemany(self, sql: str, rows: Iterable[Params]) -> Any:
        cursor = self.raw.cursor()
        cursor.executemany(sql, [_plain(row) for row in rows])
        return cursor

    def tuples(self, sql: str, params: Params = ()) -> Any:
        return self.raw.cursor().execute(sql, _plain(params) if params else None)

    def fill(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        # COPY: the rows stream in as they are, nothing parsed or planned per row.
        with self.raw.cursor().copy(sql) as copy:
            for row in rows:
                copy.write_row(_plain(row))

    def close(self) -> None:
        self.raw.close()


def _connect(dsn: str) -> Any:
    """An autocommit connection to *dsn* (StateError, with what to do, when psycopg
    is missing or the server cannot be reached)."""
    try:
        import psycopg
    except ImportError:
        raise StateError(
            "a PostgreSQL state needs psycopg: pip install 'increcrawl-scrapy[postgres]'"
        ) from None
    try:
        return psycopg.connect(dsn, autocommit=True)
    except psycopg.Error as exc:
        raise StateError(f"cannot connect to {shown(dsn)}: {exc}") from None


def connect(dsn: str, *, create: bool = True) -> Any:
    """An autocommit connection to a migrated state at *dsn* (StateError also when
    there is no state and *create* is false)."""
    raw = _connect(dsn)
    if not create and pg_schema.version(raw) == 0:
        raw.close()
        raise StateError(f"no increcrawl state in {shown(dsn)}")
    pg_schema.migrate(raw)
    return raw


def read_only(dsn: str) -> Connection:
    """A connection to the state at *dsn* whose transactions cannot write (the
    operator's read-only commands); StateError when there is none,
    or it is of another schema version than this package's (never migrated here)."""
    raw = _connect(dsn)
    found = pg_schema.version(raw)
    if found != pg_schema.SCHEMA_VERSION:
        raw.close()
        raise StateError(
            f"no increcrawl state in {shown(dsn)}"
            if not found
            else f"{shown(dsn)} has schema version {found}, this package reads "
            f"{pg_schema.SCHEMA_VERSION}: a crawl with this package brings it up to date"
        )
    raw.execute("SET default_transaction_read_only = on")
    return Connection(raw)


class PostgresDatabase:
    """An open, migrated state on a PostgreSQL server.

    A connection that dropped (a server restart, ``pg_terminate_backend``, a network
    cut) is opened again at its next use outside a transaction; ``retrying`` runs a
    unit of work again once when the connection broke under it. A reconnection ends
    the connection's session: the current run's discovery tables and its discovery
    lock go with it (that run's discovery stops, its fetches go on).
    """

    dialect = "postgresql"
    sql = STATEMENTS

    def __init__(self, dsn: str, lock_timeout: float) -> None:
        self.path = dsn
        self.lock_timeout = lock_timeout
        self.mutex = threading.RLock()
        self._raw = self._open()
        self.connection = Connection(self._raw)
        self.current_run: object | None = None
        self.closed = False
        self.reconnections = 0
        self._depth = 0  # transactions open on the connection

    def _open(self) -> Any:
        raw = connect(self.path)
        raw.execute(
            "SELECT set_config('lock_timeout', %s, false)", (f"{int(self.lock_timeout * 1000)}ms",)
        )
        return raw

    @property
    def raw(self) -> Any:
        """The connection, opened again if it dropped (never inside a transaction)."""
        if self._depth == 0 and not self.closed and self.broken():
            with contextlib.suppress(Exception):
                self._raw.close()
            self._raw = self._open()
            self.connection.raw = self._raw
            self.current_run = None  # its temporary tables were the old session's
            self.reconnections += 1
        return self._raw

    def broken(self) -> bool:
        """Whether the connection dropped (the last error was the connection's)."""
        return bool(self._raw.closed or self._raw.broken)

    def retrying(self, work: Callable[[], _T]) -> _T:
        """*work* (statements on this connection), run again once on a new
        connection if the connection dropped under it (a transaction rolled back
        with it: nothing was written)."""
        try:
            return work()
        except Exception:
            if not self.broken() or self._depth or self.closed:
                raise
            logger.warning("Connection to %s lost: connecting again", shown(self.path))
        return work()

    @contextlib.contextmanager
    def locked_errors(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        raw = self.raw
        self._depth += 1
        try:
            with raw.transaction():
                yield self.connection
        finally:
            self._depth -= 1

    def tuples(self, sql: str, params: Params = ()) -> Any:
        return self.retrying(lambda: self._statement().tuples(sql, params))

    def execute(self, sql: str, params: Params = ()) -> Any:
        return self.retrying(lambda: self._statement().execute(sql, params))

    def executemany(self, sql: str, rows: Iterable[Params]) -> Any:
        listed = list(rows)
        return self.retrying(lambda: self._statement().executemany(sql, listed))

    def fill(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        self.retrying(lambda: self._statement().fill(sql, rows))

    def fence(self, leased: Mapping[str, int], keep: set[str]) -> set[str]:
        return leases.fence(self.raw, dict(leased), keep)

    def _statement(self) -> Connection:
        self.raw  # noqa: B018 - opened again if it dropped
        return self.connection

    def close(self) -> None:
        with self.mutex:  # as SQLite's: never under a statement of another thread
            if not self.closed:
                self.closed = True
                self.current_run = None
                self._raw.close()
