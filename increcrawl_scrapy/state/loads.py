"""Rows read ahead of recording them (``Results.load``): on a shared state, on a
worker thread, so that recording reads nothing; callers at once share one read."""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.schedule.rows import PageState
from increcrawl_scrapy.state.pages import rows_by_key
from increcrawl_scrapy.urls import host_of

if TYPE_CHECKING:
    from increcrawl_scrapy.schedule.leveling import Leveling
    from increcrawl_scrapy.state.backend import Backend
    from increcrawl_scrapy.state.hosts import Hosts
    from increcrawl_scrapy.state.writes import Writer

CACHE = 50_000  # rows handed out or loaded, kept for record(), at most


class RowLoads:
    """Mixed into ``Results``, whose buffers and connections it reads into."""

    database: Backend
    io: Any
    hosts: Hosts
    leveling: Leveling
    writer: Writer
    _queued: dict[str, PageState]
    _absent: dict[str, None]
    _wanted: dict[str, None]
    _loads: threading.Condition
    _reading: bool
    _writes_done: int
    _done_log: deque[tuple[int, frozenset[str]]]
    _epoch: int

    def known(self, key: str) -> bool:  # Results.known
        raise NotImplementedError

    def _in_memory(self, key: str) -> bool:  # Results._in_memory
        raise NotImplementedError

    def load(self, keys: list[str]) -> None:
        """Read the rows of *keys* and their hosts' counts on the io connection, so
        that recording them reads nothing (a shared state: off the reactor's thread).
        Callers at once share one read: each round trip reads what all of them want.
        The store's mutex is never awaited while the io lock is held (a flush holds
        them the other way round)."""
        with self.database.mutex:
            wanted = [key for key in keys if not self.known(key)]
        with self._loads:
            self._wanted.update((key, None) for key in wanted)
            while not all(self.known(key) for key in wanted):
                if not self._reading:  # read what every caller waits for
                    self._reading = True
                    self._wanted.update((key, None) for key in wanted)  # if not read
                    keys = [key for key in self._wanted if not self.known(key)]
                    self._wanted = {}
                    break
                self._loads.wait()  # another caller is reading, perhaps these
            else:
                return
        try:
            if keys:
                self._read(keys)
        finally:
            with self._loads:
                self._reading = False
                self._loads.notify_all()

    def _read(self, keys: list[str]) -> None:
        with self.writer.lock:
            # Batches written after this point are told apart below: a row of one of
            # them read here may be older than its result.
            start, epoch = self._writes_done, self._epoch
            found = rows_by_key(self.io, keys)
            hosts = {host_of(key) for key in keys} | {p.host or "" for p in found.values()}
            counts = self.hosts.read(self.io, hosts)  # and their priors (shared)
            self.leveling.prepare(self.io)
        with self.database.mutex:
            if epoch != self._epoch or (self._done_log and self._done_log[0][0] > start + 1):
                return  # discovery wrote, or too many batches to tell: read again later
            written = set().union(*(keys for at, keys in self._done_log if at > start))
            self.hosts.learn(counts)
            for key in keys:
                if key not in written and not self._in_memory(key):
                    self._remember(key, found.get(key))

    def _remember(self, key: str, page: PageState | None) -> None:
        """A loaded row, or its absence; the oldest forgotten past the cache's size
        (loaded rows a crawl never records: pages skipped, listings)."""
        kept: dict[str, Any] = self._queued if page is not None else self._absent
        if len(kept) >= CACHE:
            del kept[next(iter(kept))]
        kept[key] = page
