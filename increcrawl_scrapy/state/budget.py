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

from increcrawl_scrapy.schedule import BUDGET_RATE_FACTOR
from increcrawl_scrapy.state.database import Database

# Live rows and gone rows still listed: the queue's two index ranges.
_DUE = (
    "SELECT {columns} FROM pages WHERE seed = :seed AND gone = 0 AND next_check <= :now "
    "UNION ALL SELECT {columns} FROM pages "
    "WHERE seed = :seed AND gone = 1 AND missing_runs = 0 AND next_check <= :now"
)
_COUNT = "SELECT count(*) FROM (" + _DUE.format(columns="next_check") + ") AS due"
_LIKELIEST = (
    "SELECT normalized_url FROM ("
    + _DUE.format(
        columns="normalized_url, next_check, last_fetched, lastmod_moved, change_rate, interval_s"
    )
    + ") AS due ORDER BY (last_fetched IS NULL OR lastmod_moved = 1) DESC, "
    "coalesce(change_rate, :implied / interval_s) * (:now - coalesce(last_fetched, :now)) DESC, "
    "next_check, normalized_url LIMIT :limit"
)
_OLDEST = (
    "SELECT normalized_url FROM ("
    + _DUE.format(columns="normalized_url, next_check")
    + ") AS due ORDER BY next_check, normalized_url LIMIT :limit"
)
_LEFT_WAITING = (
    "SELECT min(next_check) FROM ("
    + _DUE.format(columns="normalized_url, next_check")
    + ") AS due WHERE normalized_url NOT IN (SELECT key FROM temp.budget)"
)


@dataclass(frozen=True)
class Budget:
    """What a fetch budget left out of a run."""

    due: int  # due rows of the seed
    chosen: list[str] | None  # the keys to fetch, in order; None: all of them
    longest_wait: float  # seconds the longest-waiting row left due has been due

    @property
    def left(self) -> int:
        return 0 if self.chosen is None else self.due - len(self.chosen)


def choose(database: Database, seed: str, now: float, limit: int | None, order: str) -> Budget:
    """The keys a run with *limit* fetches (all when the due set fits)."""
    params: dict[str, Any] = {"seed": seed, "now": now}
    (due,) = database.execute(_COUNT, params).fetchone()
    if not limit or due <= limit:
        return Budget(due=due, chosen=None, longest_wait=0.0)
    query = _LIKELIEST if order == "change" else _OLDEST
    params.update(limit=limit, implied=BUDGET_RATE_FACTOR)
    chosen = [key for (key,) in database.execute(query, params)]
    with database.transaction() as db:
        db.execute("CREATE TEMP TABLE IF NOT EXISTS budget (key TEXT PRIMARY KEY) WITHOUT ROWID")
        db.execute("DELETE FROM temp.budget")
        db.executemany("INSERT INTO temp.budget VALUES (?)", ((key,) for key in chosen))
        (waiting,) = db.execute(_LEFT_WAITING, params).fetchone()
        db.execute("DELETE FROM temp.budget")
    longest = now - waiting if waiting is not None else 0.0
    return Budget(due=due, chosen=chosen, longest_wait=max(0.0, longest))
