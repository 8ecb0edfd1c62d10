"""The change queue and the results of fetching what it handed out.

A page's current state is, in this order: its result not yet written (pending or
held), else the row the queue handed out, else the stored row. That rule lives in
:meth:`Results.lookup` and nowhere else; :meth:`Results.settle` is the one thing
discovery does before it writes.
"""

from __future__ import annotations

import logging
import operator
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from increcrawl_scrapy.rows import (
    PAGE_COLUMNS,
    RESULT_COLUMNS,
    FetchResult,
    Outcome,
    PageState,
    Recorded,
)
from increcrawl_scrapy.schedule import RevisitPolicy, apply_result, classify, new_page
from increcrawl_scrapy.state.contents import KeptContents
from increcrawl_scrapy.state.database import Database, serialized
from increcrawl_scrapy.state.hosts import Hosts
from increcrawl_scrapy.state.leases import Lease, claim, fence, held_by_others, release
from increcrawl_scrapy.urls import host_of

logger = logging.getLogger(__name__)

_GONE = PAGE_COLUMNS.index("gone")
_MOVED = PAGE_COLUMNS.index("lastmod_moved")
_NEXT_CHECK = PAGE_COLUMNS.index("next_check")
_SELECT_PAGE = ", ".join(PAGE_COLUMNS)
_GET_PAGE = f"SELECT {_SELECT_PAGE} FROM pages WHERE normalized_url = ?"
#: The queue's stored order is (next_check, id): the order of the queue index
#: (seed, gone, next_check), whose last column is the rowid. Chunks are read by keyset
#: from where the last one ended, each part an index range that starts where it
#: should (rows due at the same time, as on a first run, are never skipped one by
#: one nor sorted): live rows, and gone rows still listed (their slow re-check).
_DUE_AFTER = (
    " UNION ALL ".join(
        f"SELECT id, {_SELECT_PAGE} FROM pages WHERE seed = :seed AND gone = {gone} AND {after}"
        + (" AND missing_runs = 0" if gone else "")
        for gone in (0, 1)
        for after in (
            "next_check = :check AND id > :id",
            "next_check > :check AND next_check <= :now",
        )
    )
    + " ORDER BY next_check, id LIMIT :limit"
)
_RESULT_INSERT = ("normalized_url", "url", "seed", "first_seen", "host", *RESULT_COLUMNS)
_INSERT_RESULT = (
    f"INSERT INTO pages ({', '.join(_RESULT_INSERT)}) "
    f"VALUES ({', '.join('?' for _ in _RESULT_INSERT)})"
)
_UPDATE_RESULT = (
    "UPDATE pages SET "
    + ", ".join(f"{c} = ?" for c in RESULT_COLUMNS)
    + " WHERE normalized_url = ?"
)
_insert_values = operator.itemgetter(*(PAGE_COLUMNS.index(c) for c in _RESULT_INSERT))
_update_values = operator.itemgetter(
    *(PAGE_COLUMNS.index(c) for c in (*RESULT_COLUMNS, "normalized_url"))
)
#: Outcomes whose text is kept (INCRECRAWL_KEEP_CONTENT); a 304 brings none.
_KEPT = (Outcome.NEW, Outcome.CHANGED, Outcome.UNCHANGED)
_QUEUE_CACHE = 50_000  # rows handed out by the queue kept for record(), at most
CHUNK = 10_000  # rows a queue chunk reads at most
#: On a shared state, rows a worker leases at once: few, so that the work spreads
#: over the workers and a dead one holds little.
SHARED_CHUNK = 100


def page_of(row: tuple[Any, ...]) -> PageState:
    values = list(row)
    values[_GONE] = bool(values[_GONE])
    values[_MOVED] = bool(values[_MOVED])
    return PageState._make(values)


class Results:
    """The due queue and the result buffer of one store."""

    def __init__(
        self,
        database: Database,
        *,
        hosts: Hosts,
        policy: RevisitPolicy,
        clock: Callable[[], float],
        flush_items: int,
        flush_seconds: float,
    ) -> None:
        self.database = database
        self.hosts = hosts
        self.policy = policy
        self.clock = clock
        self.flush_items = flush_items
        self.flush_seconds = flush_seconds
        self._pending: dict[str, PageState] = {}  # written on the next flush
        self._held: dict[str, PageState] = {}  # written once delivered (deliver())
        self._new_keys: set[str] = set()  # pending or held rows not in the table yet
        self._queued: dict[str, PageState] = {}  # handed out by the queue, not recorded
        self.contents = KeptContents()  # texts, written with their results
        #: Called before results are written (the crawl flushes its feeds first).
        self.before_write: Callable[[], None] | None = None
        self._last_flush = time.monotonic()
        # A shared state (PostgreSQL): rows are leased to this store while it fetches
        # them (state/leases.py); key -> fencing token.
        self.shared = database.dialect != "sqlite"
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.lease_seconds = 600.0
        self._leases: dict[str, int] = {}
        self.leases_lost = 0  # results not written: their lease was taken over

    # -- the queue ---------------------------------------------------------------

    @serialized
    def _chunk(
        self, seed: str, after: tuple[float, int], size: int, until: float
    ) -> tuple[list[PageState], tuple[float, int]]:
        """Up to *size* rows of *seed* due by *until* in the queue's order, after
        *after* (``(next_check, id)`` of the last row read), and where they end."""
        self.flush()
        if self.shared:
            pages = self._claim(seed, size, until)
            return pages, after
        check, last = after
        rows = self.database.tuples(
            _DUE_AFTER,
            {"seed": seed, "now": until, "check": check, "id": last, "limit": size},
        ).fetchall()
        pages = [page_of(row[1:]) for row in rows]
        if len(self._queued) + len(pages) <= _QUEUE_CACHE:
            # The crawl records these next: keep them, so recording needs no lookup.
            self._queued.update((page.normalized_url, page) for page in pages)
        return pages, ((rows[-1][1 + _NEXT_CHECK], rows[-1][0]) if rows else after)

    def chunks(
        self, seed: str, limit: int | None = None, size: int = CHUNK, *, wait: bool = False
    ) -> Iterator[list[PageState]]:
        """Every due row of *seed* (at most *limit*), most overdue first, in chunks of
        at most *size*, each read as the previous one is used. "Due" is judged at the
        first chunk's time: a row the crawl records meanwhile (its next check moves
        on) or one that falls due later is not read again in these chunks. On a shared
        state with *wait*, an empty chunk means "other workers hold the rest (they may
        give it back, or die): ask again later"."""
        left = limit or None
        after = (float("-inf"), 0)
        until = self.clock()
        if self.shared:
            size = min(size, SHARED_CHUNK)
        while left is None or left > 0:
            wanted = size if left is None else min(size, left)
            pages, after = self._chunk(seed, after, wanted, until)
            if pages:
                yield pages
            if len(pages) < wanted:
                if wait and self.shared and self._others_hold(seed):
                    yield []  # none to claim now: the caller waits, then asks again
                    continue
                return
            if left is not None:
                left -= len(pages)

    @serialized
    def rows_of(self, keys: list[str]) -> list[PageState]:
        """The stored rows of *keys*, in that order (a budget's choice); on a shared
        state, those this store could lease."""
        self.flush()
        if self.shared:
            claimed = {
                page.normalized_url: page for page in self._claim(None, len(keys), None, keys)
            }
            return [claimed[key] for key in keys if key in claimed]
        marks = ", ".join("?" for _ in keys)
        rows = self.database.tuples(
            f"SELECT {_SELECT_PAGE} FROM pages WHERE normalized_url IN ({marks})", keys
        )
        found = {page.normalized_url: page for page in map(page_of, rows)}
        pages = [found[key] for key in keys if key in found]
        if len(self._queued) + len(pages) <= _QUEUE_CACHE:
            self._queued.update((page.normalized_url, page) for page in pages)
        return pages

    def _claim(
        self, seed: str | None, size: int, until: float | None, keys: list[str] | None = None
    ) -> list[PageState]:
        """Lease due rows to this store (any worker's live lease excludes a row)."""
        if seed is None:  # a budget's keys: their seed is the rows' own
            found = None
            if keys:
                query = "SELECT seed FROM pages WHERE normalized_url = ?"
                found = self.database.tuples(query, keys[:1]).fetchone()
            if found is None:
                return []
            seed = found[0]
        now = self.clock()
        leases = claim(
            self.database.raw,  # type: ignore[attr-defined]
            seed,
            self.owner,
            size,
            now=now,
            seconds=self.lease_seconds,
            keys=keys,
            due_by=until if until is not None else now,
        )
        self._leases.update((lease.key, lease.token) for lease in leases)
        wanted = [lease.key for lease in leases]
        rows = self.database.tuples(
            f"SELECT {_SELECT_PAGE} FROM pages WHERE normalized_url = ANY(?)", (wanted,)
        )
        found = {page.normalized_url: page for page in map(page_of, rows)}
        pages = [found[key] for key in wanted if key in found]
        if len(self._queued) + len(pages) <= _QUEUE_CACHE:
            self._queued.update((page.normalized_url, page) for page in pages)
        return pages

    @serialized
    def _others_hold(self, seed: str) -> bool:
        raw = self.database.raw  # type: ignore[attr-defined]
        return held_by_others(raw, seed, self.owner, now=self.clock())

    @serialized
    def release(self) -> int:
        """Give back the rows leased and never recorded (the crawl stops early)."""
        if not self.shared or not self._leases:
            return 0
        mine = [Lease(key, token, 0.0) for key, token in self._leases.items()]
        self._leases.clear()
        return release(self.database.raw, mine)  # type: ignore[attr-defined]

    # -- one row -----------------------------------------------------------------

    def lookup(self, key: str) -> PageState | None:
        """A row as it stands: unwritten result, else queued row, else stored row."""
        page = self._pending.get(key) or self._held.get(key) or self._queued.get(key)
        if page is not None:
            return page
        row = self.database.tuples(_GET_PAGE, (key,)).fetchone()
        return page_of(row) if row else None

    # -- results -----------------------------------------------------------------

    @serialized
    def record(
        self,
        key: str,
        url: str,
        seed: str,
        status: int | None,
        *,
        content_hash: str | None = None,
        validators: tuple[str | None, str | None] | None = None,
        site_failure: bool = False,
        final_url: str | None = None,
        hold: bool = False,
        content: str | None = None,
    ) -> Recorded:
        now = self.clock()
        previous = self.lookup(key)
        self._queued.pop(key, None)  # from now on the result is the row
        outcome = classify(
            status if status is not None else 0,
            previous_hash=previous.content_hash if previous else None,
            new_hash=content_hash,
            fetched_before=bool(previous and previous.last_fetched is not None),
            was_gone=bool(previous and previous.gone),
        )
        if previous is None:
            self._new_keys.add(key)  # a URL discovery never saw: inserted when written
            previous = new_page(key, url, seed, now, self.policy.default_interval)
            previous = previous._replace(host=host_of(key))
        verdict = self.hosts.verdict(previous.host)
        result = FetchResult(outcome, status, content_hash, validators, site_failure, final_url)
        page = apply_result(previous, result, now, self.policy, verdict)
        if outcome in (Outcome.CHANGED, Outcome.UNCHANGED, Outcome.NOT_MODIFIED):
            self.hosts.observe(previous, outcome is Outcome.CHANGED, now)
        self._pending.pop(key, None)
        self._held.pop(key, None)
        (self._held if hold else self._pending)[key] = page
        if content is not None and outcome in _KEPT:
            self.contents.add(key, content, changed=outcome is not Outcome.UNCHANGED, now=now)
        if (
            len(self._pending) >= self.flush_items
            or time.monotonic() - self._last_flush >= self.flush_seconds
        ):
            self.flush()
        return Recorded(outcome=outcome, page=page)

    @serialized
    def deliver(self, key: str) -> None:
        """A held result's item was delivered: write it with the next flush."""
        page = self._held.pop(key, None)
        if page is not None:
            self._pending[key] = page

    @serialized
    def discard(self, key: str) -> bool:
        """Forget a held result (its item was not delivered): the row stays as it
        was, so the next run fetches and reports it again."""
        page = self._held.pop(key, None)
        if page is not None:
            self._new_keys.discard(key)
            self.contents.discard(key)
        return page is not None

    @property
    def held(self) -> int:
        return len(self._held)

    @serialized
    def flush(self) -> int:
        """Write pending results in one transaction. Returns how many rows."""
        self._last_flush = time.monotonic()
        if not self._pending:
            return 0
        if self.before_write is not None:
            self.before_write()
        pending = list(self._pending.values())
        with self.database.transaction() as db:
            if self._leases:
                pending = self._fenced(pending)
            new = [p for p in pending if p.normalized_url in self._new_keys]
            self.hosts.write()
            if new:
                db.executemany(_INSERT_RESULT, [_insert_values(p) for p in new])
            db.executemany(
                _UPDATE_RESULT,
                [_update_values(p) for p in pending if p.normalized_url not in self._new_keys],
            )
            self.contents.write(db, [p.normalized_url for p in pending])
        self._new_keys.difference_update(p.normalized_url for p in pending)
        self._pending.clear()
        return len(pending)

    def _fenced(self, pending: list[PageState]) -> list[PageState]:
        """The results this store may still write: those whose lease is current (a
        result that leaves its row due keeps the lease, so it is not retried at once)."""
        leased = {
            p.normalized_url: self._leases.pop(p.normalized_url)
            for p in pending
            if p.normalized_url in self._leases
        }
        now = self.clock()
        keep = {
            p.normalized_url for p in pending if p.normalized_url in leased and p.next_check <= now
        }
        ours = fence(self.database.raw, leased, keep)  # type: ignore[attr-defined]
        lost = set(leased) - ours
        if lost:
            self.leases_lost += len(lost)
            logger.warning(
                "%d results not written: another worker took their pages over (their "
                "leases expired; INCRECRAWL_LEASE_SECONDS may be too short)",
                len(lost),
            )
        return [p for p in pending if p.normalized_url not in lost]

    @serialized
    def settle(self) -> None:
        """Before discovery writes: pending results go to the table first (discovery
        decides over them), and rows handed out by the queue may change under it."""
        self.flush()
        self._queued.clear()
