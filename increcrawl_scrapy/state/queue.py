"""The change queue: the due rows of a seed, in chunks, in its stored order; on a
shared state, leased to this store (``claims.py``). What the crawl makes of them is
recorded in ``results.py``.

Which due pages a run fetches when ``INCRECRAWL_MAX_FETCHES`` is smaller than the
due set (the budget): those likeliest to have changed. A page's chance of a change
since its last fetch is ``1 - exp(-rate * age)``, with ``rate`` the policy's
estimate stored at that fetch (``change_rate``; the rate its interval implies when
there is none). The order is by ``rate * age``, the same order: new pages and pages
whose ``lastmod`` moved come first (they changed, or were never seen), then the
likeliest. Ties, and ``INCRECRAWL_BUDGET_ORDER = "oldest"``, go by the queue's own
order, longest overdue first.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from increcrawl_scrapy.schedule.policy import BUDGET_RATE_FACTOR
from increcrawl_scrapy.schedule.rows import PAGE_COLUMNS, PageState
from increcrawl_scrapy.state.backend import Backend
from increcrawl_scrapy.state.claims import ServerAway
from increcrawl_scrapy.state.pages import page_of, rows_by_key
from increcrawl_scrapy.state.results import Results

_NEXT_CHECK = PAGE_COLUMNS.index("next_check")
CHUNK = 10_000  # rows a queue chunk reads at most
#: On a shared state, rows a worker leases at once: few, so that the work spreads
#: over the workers and a dead one holds little.
SHARED_CHUNK = 100


class ChangeQueue:
    """The due rows of one store, handed to its results (which record them next)."""

    def __init__(self, results: Results) -> None:
        self.results = results
        self.database = results.database
        self.claims = results.claims

    def _chunk(
        self, seed: str, after: tuple[float, int], size: int, until: float
    ) -> tuple[list[PageState], tuple[float, int]]:
        """Up to *size* rows of *seed* due by *until* in the queue's order, after
        *after* (``(next_check, id)`` of the last row read), and where they end."""
        if self.claims is not None:
            skip = self.results.before_claim(until)
            pages, leases, counts = self.claims.claim(seed, size, until, skip=skip)
            self.results.keep_claimed(pages, leases, counts)
            return pages, after
        with self.database.mutex:
            self.results.flush()
            check, last = after
            rows = self.database.tuples(
                self.database.sql.due_after,
                {"seed": seed, "now": until, "check": check, "id": last, "limit": size},
            ).fetchall()
            pages = [page_of(row[1:]) for row in rows]
            self.results.keep_queued(pages)
        return pages, ((rows[-1][1 + _NEXT_CHECK], rows[-1][0]) if rows else after)

    def chunks(
        self, seed: str, limit: int | None = None, size: int = CHUNK, *, wait: bool = False
    ) -> Iterator[list[PageState]]:
        """Every due row of *seed* (at most *limit*), most overdue first, in chunks of
        at most *size*, each read as the previous one is used. "Due" is judged at the
        first chunk's time: a row the crawl records meanwhile (its next check moves
        on) or one that falls due later is not read again in these chunks. On a shared
        state with *wait*, an empty chunk means "other workers hold the rest (they may
        give it back, or die), or the server restarts: ask again later"."""
        left = limit or None
        after = (float("-inf"), 0)
        until = self.results.clock()
        if self.claims is not None:
            size = min(size, SHARED_CHUNK)
        rechecked = False
        while left is None or left > 0:
            wanted = size if left is None else min(size, left)
            try:
                pages, after = self._chunk(seed, after, wanted, until)
            except ServerAway:
                if not wait:
                    raise
                yield []  # the server restarts: the caller waits, then asks again
                continue
            if pages:
                rechecked = False
                yield pages
            if len(pages) < wanted:
                if wait and self.claims is not None:
                    try:
                        others = self.claims.others_lease(seed)
                    except ServerAway:
                        others = True  # asked again once the server is back
                    if others:
                        yield []  # none to claim now: the caller waits, then asks again
                        continue
                    if not rechecked:
                        # The leases that kept rows from the claim may have run out
                        # before that question: claim once more before calling it done.
                        rechecked = True
                        continue
                return
            if left is not None:
                left -= len(pages)

    def chosen_chunks(
        self, chosen: list[str], size: int, *, wait: bool = False
    ) -> Iterator[list[PageState]]:
        """The rows of *chosen* (a budget's keys), in chunks of *size* (``rows_of``);
        with *wait*, an empty chunk while the server restarts, the same asked again."""
        if self.claims is not None:  # claimed as the queue's rows are: a share at a time
            size = min(size, SHARED_CHUNK)
        at = 0
        while at < len(chosen):
            try:
                pages = self.rows_of(chosen[at : at + size])
            except ServerAway:
                if not wait:
                    raise
                yield []
                continue
            at += size
            yield pages

    def rows_of(self, keys: list[str]) -> list[PageState]:
        """The stored rows of *keys*, in that order (a budget's choice); on a shared
        state, those this store could lease."""
        if self.claims is not None:
            skip = self.results.before_claim(self.results.clock())
            pages, leases, counts = self.claims.claim(None, len(keys), None, keys, skip=skip)
            self.results.keep_claimed(pages, leases, counts)
            claimed = {page.normalized_url: page for page in pages}
            return [claimed[key] for key in keys if key in claimed]
        with self.database.mutex:
            self.results.flush()
            found = rows_by_key(self.database, keys)
            pages = [found[key] for key in keys if key in found]
            self.results.keep_queued(pages)
        return pages


@dataclass(frozen=True)
class Budget:
    """What a fetch budget left out of a run."""

    due: int  # due rows of the seed
    chosen: list[str] | None  # the keys to fetch, in order; None: all of them
    longest_wait: float  # seconds the longest-waiting row left due has been due

    @property
    def left(self) -> int:
        return 0 if self.chosen is None else self.due - len(self.chosen)


def choose(database: Backend, seed: str, now: float, limit: int | None, order: str) -> Budget:
    """The keys a run with *limit* fetches (all when the due set fits)."""
    params: dict[str, Any] = {"seed": seed, "now": now}
    sql = database.sql
    (due,) = database.execute(sql.due_count, params).fetchone()
    if not limit or due <= limit:
        return Budget(due=due, chosen=None, longest_wait=0.0)
    query = sql.due_likeliest if order == "change" else sql.due_oldest
    params.update(limit=limit, implied=BUDGET_RATE_FACTOR)
    chosen = [key for (key,) in database.execute(query, params)]
    with database.transaction() as db:
        db.execute(sql.budget_table)
        db.execute(sql.clear_budget)
        db.executemany(sql.add_budget, [(key,) for key in chosen])
        (waiting,) = db.execute(sql.left_waiting, params).fetchone()
        db.execute(sql.clear_budget)
    longest = now - waiting if waiting is not None else 0.0
    return Budget(due=due, chosen=chosen, longest_wait=max(0.0, longest))
