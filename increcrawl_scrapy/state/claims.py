"""A shared state's side of the change queue: the rows leased to this store while it
fetches them (``leases.py``), claimed, checked and given back, and the heartbeat, all
on a connection of their own (*io*, with its own lock) so that the crawl's thread
never waits on them."""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any, TypeVar

from twisted.python.threadable import isInIOThread

from increcrawl_scrapy import compat
from increcrawl_scrapy.schedule.leveling import Leveling
from increcrawl_scrapy.schedule.rows import PageState
from increcrawl_scrapy.state.hosts import Hosts
from increcrawl_scrapy.state.pages import rows_by_key
from increcrawl_scrapy.state.postgres.database import PostgresDatabase
from increcrawl_scrapy.state.postgres.leases import Lease, claim, leased_by_others, release, renew
from increcrawl_scrapy.state.postgres.workers import beat, leave

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
#: How long claims (and the last write) wait for an unreachable server to come back.
OUTAGE_SECONDS = 60.0


class ServerAway(Exception):
    """The state's server cannot be reached now (a restart): ask again in a moment."""


async def waiting_out(call: Callable[[], _T]) -> _T:
    """*call* on a worker thread, asked again a second later (waiting on the reactor)
    for as long as it raises :class:`ServerAway`."""
    while True:
        try:
            return await compat.in_thread(call)
        except ServerAway:
            await compat.sleep(1.0)


async def write_last(flush: Callable[[], int], claims: Claims | None) -> int:
    """A crawl's last write: on a shared state, a restarting server waited out (nothing
    records any more, and what is pending would be lost)."""
    if claims is None:
        return await compat.in_thread(flush)
    return await waiting_out(lambda: claims.attempt(flush))


class Claims:
    def __init__(
        self, io: PostgresDatabase, lock: Any, clock: Callable[[], float], hosts: Hosts
    ) -> None:
        self.io = io
        self.lock = lock
        self.clock = clock
        self.hosts = hosts
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.seconds = 600.0  # INCRECRAWL_LEASE_SECONDS
        #: Key -> fencing token of the rows leased and not yet written (guarded by
        #: the store's mutex: results take their tokens when they are written).
        self.tokens: dict[str, int] = {}
        self.lost = 0  # results not written: their lease was taken over
        self.outage_seconds = OUTAGE_SECONDS
        self._away_since: float | None = None  # the first try the server missed
        self.leveling: Leveling | None = None  # the results' (``schedule/leveling.py``)

    def claim(
        self,
        seed: str | None,
        size: int,
        until: float | None,
        keys: list[str] | None = None,
        *,
        skip: list[str] | None = None,
    ) -> tuple[list[PageState], list[Lease], dict[str, list[float]]]:
        """Lease due rows of *seed* (any worker's live lease excludes a row), or those
        of *keys* that are (a budget's choice), none of *skip*: the rows, their leases
        and their hosts' counts, for the caller to keep."""
        return self.attempt(lambda: self._claim(seed, size, until, keys, skip), self.lock)

    def _claim(
        self,
        seed: str | None,
        size: int,
        until: float | None,
        keys: list[str] | None,
        skip: list[str] | None,
    ) -> tuple[list[PageState], list[Lease], dict[str, list[float]]]:
        if seed is None:  # a budget's keys: their seed is the rows' own
            found = None
            if keys:
                found = self.io.tuples(self.io.sql.seed_of_page, keys[:1]).fetchone()
            if found is None:
                return [], [], {}
            seed = found[0]
        due_by = until if until is not None else self.clock()  # the schedule's clock
        leases = claim(
            self.io.raw,
            seed,
            self.owner,
            size,
            now=None,  # leases on the server's clock: one for every worker
            seconds=self.seconds,
            keys=keys,
            due_by=due_by,
            skip=skip,
        )
        wanted = [lease.key for lease in leases]
        found = rows_by_key(self.io, wanted) if wanted else {}
        pages = [found[key] for key in wanted if key in found]
        counts = self.hosts.read(self.io, {page.host or "" for page in pages})  # priors too
        if self.leveling is not None:
            self.leveling.prepare(self.io)  # the plan the next checks are spread over
        return pages, leases, counts

    def attempt(self, work: Callable[[], _T], lock: Any = None) -> _T:
        """*work* on the io connection, holding *lock*, once. While the server cannot
        be reached (a restart) this raises :class:`ServerAway` for up to
        ``outage_seconds`` from the first failed try, then the error itself: the
        caller waits between tries on the reactor (``waiting_out``), holding no
        thread of the pool and no lock (the heartbeat and the leases' release take
        it too)."""
        try:
            with lock if lock is not None else nullcontext():
                done = self.io.retrying(work)
        except Exception as exc:
            if not self.io.broken() or isInIOThread():
                raise  # not an outage; and never an outage wait on the reactor's thread
            now = time.monotonic()
            if self._away_since is None:
                self._away_since = now
                logger.warning(
                    "The state's server cannot be reached: waiting for it (at most %.0f s)",
                    self.outage_seconds,
                )
            if now - self._away_since >= self.outage_seconds:
                self._away_since = None
                raise
            raise ServerAway(str(exc)) from exc
        self._away_since = None
        return done

    def others_lease(self, seed: str) -> bool:
        return self.attempt(
            lambda: leased_by_others(self.io.raw, seed, self.owner, now=None), self.lock
        )

    def release(self, leases: list[Lease]) -> int:
        """Give back rows leased and never answered (the crawl stops early)."""
        if not leases:
            return 0
        with self.lock:
            return self.io.retrying(lambda: release(self.io.raw, leases))

    def beat(self, seed: str, ttl: float, leased: dict[str, int] | None = None) -> tuple[int, int]:
        """The heartbeat (``state/postgres/workers.py``): live crawls on *seed*, and in all.
        The leases in *leased* (key -> token: pages in flight) are renewed with it."""
        with self.lock:
            counts = self.io.retrying(
                lambda: beat(self.io.raw, self.owner, seed, now=None, ttl=ttl)
            )
            if leased:
                self.io.retrying(lambda: renew(self.io.raw, leased, seconds=self.seconds))
        return counts

    def leave(self) -> None:
        with self.lock:
            self.io.retrying(lambda: leave(self.io.raw, self.owner))
