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

from collections.abc import Iterable, Set
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lease:
    key: str  # the page's normalized URL
    token: int
    expires_at: float


#: Due rows of the seed (live rows, and gone rows still listed) with no live lease, in
#: the queue's order; their rows are locked for this transaction, rows another worker
#: is claiming right now skipped.
#: An expired lease is taken over only where it is still expired at write time.
_CLAIM = """
WITH due AS (
    SELECT p.normalized_url FROM pages AS p
    WHERE p.seed = %(seed)s AND GONE
      AND p.next_check <= %(due_by)s
      AND NOT p.normalized_url = ANY(%(skip)s::text[])
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


#: The same for chosen rows (a fetch budget's choice), in the order given.
_CLAIM_KEYS = _CLAIM.replace(
    "SELECT p.normalized_url FROM pages AS p\n    WHERE p.seed = %(seed)s",
    "SELECT p.normalized_url FROM pages AS p\n"
    "    WHERE p.normalized_url = ANY(%(keys)s) AND p.seed = %(seed)s",
)
assert _CLAIM_KEYS != _CLAIM


def server_now(connection: Any) -> float:
    """The server's clock (Unix seconds): leases and heartbeats are timed by it, one
    clock for every worker, whatever their own say."""
    return float(connection.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0])


def claim(
    connection: Any,
    seed: str,
    owner: str,
    size: int,
    *,
    now: float | None,
    seconds: float,
    keys: list[str] | None = None,
    due_by: float | None = None,
    skip: list[str] | None = None,
) -> list[Lease]:
    """Lease up to *size* pages of *seed* due by *due_by* (default *now*; of *keys*
    only, if given; none of *skip*) to *owner* until ``now + seconds``, in the
    queue's order. *now* None: the server's clock."""
    if now is None:
        now = server_now(connection)
    params = {
        "seed": seed,
        "owner": owner,
        "size": size,
        "now": now,
        "due_by": now if due_by is None else due_by,
        "until": now + seconds,
        "keys": keys,
        "skip": skip or [],
    }
    statement = _CLAIM if keys is None else _CLAIM_KEYS
    # Leases expired for longer than a lease lasts (a dead worker's no one took over,
    # leases kept after failed fetches of rows no longer due) go first, in a statement
    # of its own that never waits: rows another transaction holds are left for later.
    # A worker that late was long presumed dead: its results are refused (lost).
    connection.execute(_CLEAN, (now - seconds,))
    with connection.transaction():
        # Live rows, then gone rows still listed: each an index range in the queue's
        # order (one query with OR could use neither: it sorted every due row).
        rows = connection.execute(statement.replace("GONE", _LIVE), params).fetchall()
        if len(rows) < size:
            params["size"] = size - len(rows)
            rows += connection.execute(statement.replace("GONE", _LISTED), params).fetchall()
    return sorted((Lease(key, token, expires) for key, token, expires in rows), key=_order)


_CLEAN = (
    "DELETE FROM leases WHERE normalized_url IN (SELECT normalized_url FROM leases "
    "WHERE expires_at < %s FOR UPDATE SKIP LOCKED)"
)
_LIVE = "p.gone = 0"
_LISTED = "p.gone = 1 AND p.missing_runs = 0"


def fence(connection: Any, leases: dict[str, int], keep: Set[str] = frozenset()) -> set[str]:
    """Within the caller's transaction, before it writes results: the keys whose
    lease (key -> token) is still current; a result whose lease was taken over must
    not be written. Those leases end, except for the keys in *keep* (a failure that
    leaves its page due: no worker retries it before the lease expires). The pages'
    rows are locked first, as a claim locks them, so a claim skips them and never
    waits on this."""
    keys = sorted(leases)
    if not keys:
        return set()
    connection.execute(
        "SELECT 1 FROM pages WHERE normalized_url = ANY(%s) ORDER BY normalized_url FOR UPDATE",
        (keys,),
    )
    ours: set[str] = set()
    for statement, chosen in (
        (_END, [key for key in keys if key not in keep]),
        (_KEEP, [key for key in keys if key in keep]),
    ):
        if chosen:
            rows = connection.execute(statement, (chosen, [leases[key] for key in chosen]))
            ours.update(key for (key,) in rows.fetchall())
    return ours


_PAIRS = "(normalized_url, token) IN (SELECT * FROM unnest(%s::text[], %s::bigint[]))"
_END = f"DELETE FROM leases WHERE {_PAIRS} RETURNING normalized_url"
_KEEP = f"UPDATE leases SET kept = 1 WHERE {_PAIRS} RETURNING normalized_url"


#: Leases of pages still in flight, renewed once past half their length (never
#: waiting on a row another transaction holds: renewed at the next beat then).
_RENEW = f"""
UPDATE leases SET expires_at = %s WHERE normalized_url IN (
    SELECT normalized_url FROM leases WHERE {_PAIRS} AND kept = 0 AND expires_at < %s
    FOR UPDATE SKIP LOCKED)
"""


def renew(connection: Any, leases: dict[str, int], *, seconds: float) -> int:
    """Extend the leases (key -> token) of pages this worker still fetches (a batch
    job may take longer than a lease) to ``seconds`` from now on the server's clock,
    those past half their length; how many. A lease taken over is not renewed."""
    if not leases:
        return 0
    keys = sorted(leases)
    now = server_now(connection)
    params = (now + seconds, keys, [leases[key] for key in keys], now + seconds / 2)
    return int(connection.execute(_RENEW, params).rowcount)


def leased_by_others(connection: Any, seed: str, owner: str, *, now: float | None) -> bool:
    """Whether other workers hold live leases on *seed*'s pages that they are still
    fetching (not those kept after a failure): they may come back to the queue (a
    dead worker's, when they expire), so a worker with nothing to claim waits.
    *now* None: the server's clock."""
    if now is None:
        now = server_now(connection)
    row = connection.execute(
        "SELECT 1 FROM leases AS l JOIN pages AS p ON p.normalized_url = l.normalized_url "
        "WHERE p.seed = %s AND l.owner <> %s AND l.kept = 0 AND l.expires_at > %s LIMIT 1",
        (seed, owner, now),
    ).fetchone()
    return row is not None


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
