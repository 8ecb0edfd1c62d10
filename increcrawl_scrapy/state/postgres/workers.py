"""The crawls working on a shared PostgreSQL state, by heartbeat: how many share a
seed (its host's politeness) and the state (the Geonode plan's concurrency).

A worker beats every few seconds; one that has not beaten for ``ttl`` seconds (it
died) no longer counts. No database round trip per request: each worker sizes its
own limits from the counts (``cluster_share.py``).
"""

from __future__ import annotations

from typing import Any

_BEAT = """
INSERT INTO workers (owner, seed, heartbeat) VALUES (%(owner)s, %(seed)s, %(now)s)
ON CONFLICT (owner) DO UPDATE SET seed = excluded.seed, heartbeat = excluded.heartbeat
"""
_COUNT = """
SELECT count(*) FILTER (WHERE seed = %(seed)s), count(*) FROM workers
WHERE heartbeat > %(now)s - %(ttl)s
"""


def beat(
    connection: Any, owner: str, seed: str, *, now: float | None, ttl: float
) -> tuple[int, int]:
    """Record that *owner* works on *seed*; the live workers on the seed, and in all.
    *now* None: the server's clock (every worker's beats on one clock)."""
    if now is None:
        now = float(
            connection.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
        )
    params = {"owner": owner, "seed": seed, "now": now, "ttl": ttl}
    with connection.transaction():
        connection.execute(_BEAT, params)
        connection.execute("DELETE FROM workers WHERE heartbeat <= %(now)s - 10 * %(ttl)s", params)
        on_seed, total = connection.execute(_COUNT, params).fetchone()
    return int(on_seed), int(total)


def leave(connection: Any, owner: str) -> None:
    connection.execute("DELETE FROM workers WHERE owner = %s", (owner,))
