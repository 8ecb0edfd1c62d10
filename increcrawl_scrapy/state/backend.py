"""The one typed interface the store's parts use, whichever database holds the
state: ``sqlite.database.Database`` (a file) and ``postgres.database.PostgresDatabase``
(a server) both implement it, each with its own statements (``statements.py``).
The parts above it (runs, results, hosts, ...) never ask which one they have."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar, cast

from increcrawl_scrapy.state.statements import Statements

#: A statement's parameters: by position, or by name.
Params = Sequence[Any] | Mapping[str, Any]
_T = TypeVar("_T")


class Cursor(Protocol):
    """What a statement returns (rows by position, or by column name)."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def fetchmany(self, size: int = ...) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Session(Protocol):
    """Where statements run: the database itself, or its open transaction."""

    @property
    def sql(self) -> Statements: ...

    def execute(self, sql: str, params: Params = ()) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Params]) -> Cursor: ...

    def tuples(self, sql: str, params: Params = ()) -> Cursor:
        """As ``execute``, rows as plain tuples (built into ``PageState`` directly)."""
        ...

    def fill(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """*rows* into a table by one statement, however many (``fill_chunk``)."""
        ...


class Backend(Session, Protocol):
    """An open, checked and migrated state, used by one thread at a time (``mutex``)."""

    dialect: str
    path: str
    lock_timeout: float
    mutex: threading.RLock
    #: The run whose discovery tables the connection holds (a ``runs.Run``, told by
    #: its identity: the interface names no part above it).
    current_run: object | None
    closed: bool

    def transaction(self) -> AbstractContextManager[Session]: ...

    def locked_errors(self) -> AbstractContextManager[None]: ...

    def retrying(self, work: Callable[[], _T]) -> _T:
        """*work*, run again once on a new connection if the connection dropped."""
        ...

    def fence(self, leased: Mapping[str, int], keep: set[str]) -> set[str]:
        """The keys of *leased* (key -> fencing token) whose lease is still this
        store's, locked for the write; those in *keep* stay leased."""
        ...

    def close(self) -> None: ...


_F = TypeVar("_F", bound=Callable[..., Any])


def serialized(method: _F) -> _F:
    """One thread at a time on the connection (the reactor, or a discovery worker)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.database.mutex:
            return method(self, *args, **kwargs)

    return cast("_F", wrapper)
