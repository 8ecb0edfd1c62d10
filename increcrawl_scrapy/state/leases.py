"""Leases on due pages, for several crawl processes sharing one PostgreSQL state.

A worker *claims* a batch of due pages: ``SELECT ... FOR UPDATE SKIP LOCKED`` picks
rows no other transaction is claiming, in the queue's order, and each gets a lease
(owner, expiry, fencing token from one sequence). A page under a live lease is not
claimed again; once the lease expires (its worker died or stalled), any worker may
claim it, with a new, larger token. A result is written only under the page's
current token (``fenced_update``), so a worker presumed dead that comes back cannot
overwrite the result of the worker that took its pages over. Writing a result
releases the lease; the result's next check keeps the page out of the queue.

Unlike a row or advisory lock, a lease outlives its worker's connection: a page
being fetched is not handed to another worker the moment a connection drops, only
after ``seconds`` (INCRECRAWL_LEASE_SECONDS: a few times the slowest fetch).
PostgreSQL only; a SQLite file has one crawl at a time (its lock) and needs none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lease:
    key: str  # the page's normalized URL
    token: int
    expires_at: float


#: Due rows of the seed with no live lease, in the queue's order; their rows are
#: locked for this transaction, rows another worker is claiming right now skipped.
#: An expired lease is taken over only where it is still expired at write time.
_CLAIM = """
WITH due AS (
    SELECT p.normalized_url FROM pages AS p
    WHERE p.seed = %(seed)s AND p.gone = 0 AND p.next_check <= %(now)s
      AND NOT EXISTS (
          SELECT 1 FROM leases AS l
          WHERE l.normalized_url = p.normalized_url AND l.expires_at > %(now)s)
    ORDER BY p.next_check, p.id
    LIMIT %(size)s
    FOR UPDATE OF p SKIP LOCKED
)
INSERT INTO leases (normalized_url, owner, token, expires_at)
SELECT normalized_url, %(owner)s, nextval('lease_tokens'), %(until)s FROM due
ON CONFLICT (normalized_url) DO UPDATE
    SET owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at
    WHERE leases.expires_at <= %(now)s
RETURNING normalized_url, token, expires_at
"""


def claim(
    connection: Any, seed: str, owner: str, size: int, *, now: float, seconds: float
) -> list[Lease]:
    """Lease up to *size* due pages of *seed* to *owner* until ``now + seconds``."""
    params = {"seed": seed, "owner": owner, "size": size, "now": now, "until": now + seconds}
    with connection.transaction():
        rows = connection.execute(_CLAIM, params).fetchall()
    return sorted((Lease(key, token, expires) for key, token, expires in rows), key=_order)


def fenced_update(connection: Any, lease: Lease, values: dict[str, Any]) -> bool:
    """Write *values* (columns of ``pages``) to the leased page and release the lease,
    only if *lease* is still the page's current one; whether it was."""
    if not values:
        raise ValueError("nothing to write")
    assignments = ", ".join(f"{column} = %({column})s" for column in values)
    params = {**values, "_key": lease.key, "_token": lease.token}
    with connection.transaction():
        # The page's row first, as a claim locks it: the two never wait on each other.
        connection.execute("SELECT 1 FROM pages WHERE normalized_url = %(_key)s FOR UPDATE", params)
        released = connection.execute(
            "DELETE FROM leases WHERE normalized_url = %(_key)s AND token = %(_token)s",
            params,
        ).rowcount
        if released:
            connection.execute(
                f"UPDATE pages SET {assignments} WHERE normalized_url = %(_key)s", params
            )
    return bool(released)


def release(connection: Any, leases: Iterable[Lease]) -> int:
    """Give pages back unfetched (a worker shutting down): claimable at once."""
    leases = list(leases)
    if not leases:
        return 0
    with connection.transaction():
        return int(
            connection.execute(
                "DELETE FROM leases WHERE (normalized_url, token) IN "
                "(SELECT * FROM unnest(%s::text[], %s::bigint[]))",
                ([lease.key for lease in leases], [lease.token for lease in leases]),
            ).rowcount
        )


def _order(lease: Lease) -> int:
    return lease.token
