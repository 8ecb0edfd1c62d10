"""What a page's last fetch leaves for the next one (``pages/memory.py`` says what is
in it): one compressed blob a page, written in the transaction of the page's
result, so a result never delivered (``delivery.py``) leaves the page's memory as
it was too. But for one a run kept alone: the memory of a page whose items a close
left held (``pages/moved.py``), written without its result."""

from __future__ import annotations

from typing import Any

from increcrawl_scrapy.state.backend import Session


class Memories:
    """Memories recorded by the crawl, written with the results they belong to."""

    def __init__(self) -> None:
        self._pending: dict[str, bytes] = {}
        self._alone: dict[str, bytes] = {}  # written without their results (keep_alone)
        self._taken_alone: set[str] = set()  # of the batch being written

    def add(self, key: str, body: bytes) -> None:
        self._pending[key] = body

    @property
    def alone(self) -> bool:
        """Whether a memory waits to be written alone (a flush has work)."""
        return bool(self._alone)

    def keep(self, key: str, body: bytes) -> None:
        """*body* is written alone (``keep_alone``)."""
        self._pending.pop(key, None)
        self._alone[key] = body

    def get(self, key: str) -> bytes | None:
        """*key*'s memory not written yet: with its result, else alone."""
        body = self._pending.get(key)
        return body if body is not None else self._alone.get(key)

    def discard(self, key: str) -> None:
        self._pending.pop(key, None)

    def take(self, keys: list[str]) -> list[tuple[str, bytes]]:
        """The rows of *keys*' memories (the results being written), out of the
        buffer, and those written alone (their keys not among *keys*)."""
        rows = [(key, self._pending.pop(key)) for key in keys if key in self._pending]
        alone, self._alone = self._alone, {}
        self._taken_alone = set(alone)
        return rows + list(alone.items())

    def restore(self, rows: list[tuple[str, bytes]]) -> None:
        """Memories whose write failed: back in the buffer, unless a later one came."""
        for key, body in rows:
            (self._alone if key in self._taken_alone else self._pending).setdefault(key, body)


def keep_alone(results: Any, key: str, body: bytes, *, recorded: bool) -> bool:
    """Write *body* as *key*'s memory with the next flush (the store's ``Results``),
    without its result, which stays unwritten: the page stays due. A result
    *recorded* this run must still wait (its items not all delivered; not given
    up when one was lost: ``delivery.py``). Whether it is written."""
    with results.database.mutex:
        if not results.discard(key) and recorded:
            return False
        results.memories.keep(key, body)
        return True


def lookup(results: Any, database: Session, key: str) -> bytes | None:
    """*key*'s memory as it stands: recorded this run and unwritten (in *results*,
    the store's ``Results``), being written, else stored (a read: on a shared
    state, off the reactor's thread)."""
    body = results.memories.get(key)
    if body is not None:
        return body
    for written, kept in results.writer.in_flight_memories:
        if written == key:
            return kept
    row = database.tuples(database.sql.read_memory, (key,)).fetchone()
    return bytes(row[0]) if row else None


def amend(results: Any, key: str, memory: bytes) -> None:
    """*key*'s memory recorded again (``StoreReadings.amend_memory``): with its result
    if that is not written yet, else with its row as it stands, written again."""
    if key not in results._pending and key not in results._undelivered:
        page = results.lookup(key)
        if page is None:
            return
        results._pending[key] = page
    results.memories.add(key, memory)
