"""Which due pages a run fetches when ``INCRECRAWL_MAX_FETCHES`` is smaller than
the due set: those likeliest to have changed.

A page's chance of a change since its last fetch is ``1 - exp(-rate * age)``, with
``rate`` the policy's estimate stored at that fetch (``change_rate``; the rate its
interval implies when there is none). The order is by ``rate * age``, the same
order: new pages and pages whose ``lastmod`` moved come first (they changed, or
were never seen), then the likeliest. Ties, and ``INCRECRAWL_BUDGET_ORDER =
"oldest"``, go by the queue's own order, longest overdue first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from increcrawl_scrapy.schedule.policy import BUDGET_RATE_FACTOR
from increcrawl_scrapy.state.backend import Backend


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
