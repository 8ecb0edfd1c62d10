"""Copy a whole crawl state between SQLite files and PostgreSQL databases, then
check the copy: the same number of rows in every table, and a sample of rows
(spread over each table's key order) identical column for column.

The source is read in one transaction (a consistent snapshot, even while a crawl
writes to it); the target must be empty, so nothing is ever merged or overwritten.
"""

from __future__ import annotations

import contextlib
import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from increcrawl_scrapy.state.errors import StateError
from increcrawl_scrapy.state.locations import is_postgres, shown
from increcrawl_scrapy.state.postgres.database import connect
from increcrawl_scrapy.state.sqlite.database import Database

#: Every table of a state, with its key (the sample is spread over its order).
TABLES: dict[str, tuple[str, ...]] = {
    "pages": ("normalized_url",),
    "runs": ("id",),
    "sitemaps": ("seed", "url"),
    "settings": ("name",),
    "hosts": ("host",),
    "contents": ("normalized_url",),
    "memories": ("normalized_url",),
    "checks": ("run", "page"),
}
_BATCH = 5000
_NUMBERS = ("id", "run", "page")  # key columns that are not text


def driver_errors() -> tuple[type[Exception], ...]:
    """What the databases' drivers raise (the commands report them in one line). Read
    where an error is caught, not at import: psycopg is imported by a PostgreSQL state
    when it connects, before it can raise anything, and importing it costs every
    ``scrapy`` command (this package's entry point) about 60 ms otherwise."""
    psycopg = sys.modules.get("psycopg")
    return (sqlite3.Error,) if psycopg is None else (sqlite3.Error, psycopg.Error)


@dataclass
class TableCopy:
    table: str
    source_rows: int
    target_rows: int
    sampled: int
    differing: list[str] = field(default_factory=list)  # keys of sampled rows that differ

    @property
    def ok(self) -> bool:
        return self.source_rows == self.target_rows and not self.differing


def copy_state(source: str, target: str, *, sample: int = 1000) -> list[TableCopy]:
    """Copy every table of *source* into the empty *target* and check the copy."""
    if source == target:
        raise StateError("--from and --to name the same state")
    with _open(source, create=False) as reader, _open(target, create=True) as writer:
        writer.require_empty()
        reader.begin_snapshot()
        report = []
        for table, key in TABLES.items():
            columns = reader.columns(table)
            missing = set(columns) - set(writer.columns(table))
            if missing:
                raise StateError(f"{shown(target)} has no column {sorted(missing)} in {table}")
            writer.write(table, columns, reader.rows(table, columns, key))
        writer.commit()
        for table, key in TABLES.items():
            columns = reader.columns(table)
            count = reader.count(table)
            keys = reader.sample_keys(table, key, count, sample)
            differing = [
                "/".join(map(str, values))
                for values in keys
                if reader.row(table, columns, key, values)
                != writer.row(table, columns, key, values)
            ]
            report.append(TableCopy(table, count, writer.count(table), len(keys), differing))
        reader.end_snapshot()
    return report


class _Side:
    """One end of a copy: the few operations it needs, each end in its own SQL
    (*mark*: its parameters' placeholder)."""

    mark = "?"

    def __init__(self, connection: Any) -> None:
        self.connection = connection

    def execute(self, sql: str, params: Any = ()) -> Any:
        return self.connection.execute(sql, params)

    def columns(self, table: str) -> list[str]:
        raise NotImplementedError

    def count(self, table: str) -> int:
        return int(self.execute(f"SELECT count(*) FROM {table}").fetchone()[0])

    def order(self, key: tuple[str, ...]) -> str:
        return ", ".join(key)

    def rows(self, table: str, columns: list[str], key: tuple[str, ...]) -> Iterator[tuple]:
        cursor = self.execute(f"SELECT {', '.join(columns)} FROM {table}")
        while batch := cursor.fetchmany(_BATCH):
            yield from (tuple(_plain(value) for value in row) for row in batch)

    def sample_keys(
        self, table: str, key: tuple[str, ...], count: int, size: int
    ) -> list[tuple[Any, ...]]:
        step = max(1, count // max(1, size))
        cursor = self.execute(f"SELECT {', '.join(key)} FROM {table} ORDER BY {self.order(key)}")
        keys: list[tuple[Any, ...]] = []
        at = 0
        while batch := cursor.fetchmany(_BATCH):
            for row in batch:
                if at % step == 0 and len(keys) < size:
                    keys.append(tuple(row))
                at += 1
        return keys

    def row(
        self, table: str, columns: list[str], key: tuple[str, ...], values: tuple[Any, ...]
    ) -> tuple | None:
        where = " AND ".join(f"{name} = {self.mark}" for name in key)
        found = self.execute(
            f"SELECT {', '.join(columns)} FROM {table} WHERE {where}", values
        ).fetchone()
        return tuple(_plain(value) for value in found) if found is not None else None

    def require_empty(self) -> None:
        for table in TABLES:
            rows = self.count(table)
            if rows:
                raise StateError(
                    f"the target already holds a state ({rows} rows in {table}): "
                    "migrate into a new, empty database"
                )


class _SQLite(_Side):
    def __init__(self, path: str, create: bool) -> None:
        if create and Path(path).exists() and Path(path).stat().st_size > 0:
            raise StateError(f"{path} exists: migrate into a new file")
        if not create and not Path(path).exists():
            raise StateError(f"no state database at {path}")
        self.database = Database(path, lock_timeout=30.0)  # checked and migrated forward
        super().__init__(self.database.connection)
        self.connection.row_factory = None

    def columns(self, table: str) -> list[str]:
        return [row[1] for row in self.execute(f"PRAGMA table_info({table})")]

    def begin_snapshot(self) -> None:
        self.execute("BEGIN")  # WAL: one consistent read, whatever a crawl writes

    def end_snapshot(self) -> None:
        self.execute("COMMIT")

    def write(self, table: str, columns: list[str], rows: Iterator[tuple]) -> None:
        if not self.connection.in_transaction:
            self.execute("BEGIN IMMEDIATE")
        marks = ", ".join("?" for _ in columns)
        insert = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
        self.connection.executemany(insert, rows)

    def commit(self) -> None:
        self.execute("COMMIT")

    def close(self) -> None:
        if self.connection.in_transaction:
            self.execute("ROLLBACK")
        self.database.close()


class _Postgres(_Side):
    mark = "%s"

    def __init__(self, dsn: str, create: bool) -> None:
        connection = connect(dsn, create=create)
        connection.autocommit = False  # the copy and the snapshot are transactions
        super().__init__(connection)

    def columns(self, table: str) -> list[str]:
        rows = self.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
            (table,),
        )
        return [row[0] for row in rows]

    def order(self, key: tuple[str, ...]) -> str:
        # Byte order, as SQLite's: the same keys are sampled whichever side reads.
        return ", ".join(name if name in _NUMBERS else f'{name} COLLATE "C"' for name in key)

    def begin_snapshot(self) -> None:
        self.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")

    def end_snapshot(self) -> None:
        self.connection.rollback()

    def write(self, table: str, columns: list[str], rows: Iterator[tuple]) -> None:
        with self.connection.cursor() as cursor:
            statement = f"COPY {table} ({', '.join(columns)}) FROM STDIN"
            with cursor.copy(statement) as copy:
                for row in rows:
                    copy.write_row(row)

    def commit(self) -> None:
        for table in ("pages", "runs"):  # new rows continue after the copied ids
            self.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"coalesce(max(id), 0) + 1, false) FROM {table}"
            )
        self.connection.commit()

    def close(self) -> None:
        self.connection.close()


@contextlib.contextmanager
def _open(location: str, *, create: bool) -> Iterator[Any]:
    side: _SQLite | _Postgres = (
        _Postgres(location, create) if is_postgres(location) else _SQLite(location, create)
    )
    try:
        yield side
    finally:
        side.close()


def _plain(value: Any) -> Any:
    """The same value whichever side read it (bytea comes back as memoryview)."""
    return bytes(value) if isinstance(value, memoryview) else value
