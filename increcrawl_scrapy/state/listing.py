"""What a discovery chunk says before it is applied: how many of its rows this run
had not listed yet (the same URL in two sitemaps, or the same sitemap under two
names, is one discovered URL), and whose rows it takes from another seed."""

from __future__ import annotations

from collections import Counter
from typing import Any

#: The chunk's rows by the seed they had, among those this run had not listed yet
#: (NULL: a row never seen). Each a primary-key lookup, driven by the chunk.
_LISTED_BEFORE = """
SELECT p.seed, count(*) FROM temp.chunk AS c
LEFT JOIN pages AS p ON p.normalized_url = c.normalized_url
WHERE p.seen_run IS NOT :run
GROUP BY p.seed
"""

#: Future lastmods per host, counted as evidence (state/lastmod.py reads them).
COUNT_FUTURE = (
    "INSERT INTO hosts (host, future_dates) VALUES (?, ?) "
    "ON CONFLICT (host) DO UPDATE SET future_dates = hosts.future_dates + excluded.future_dates"
)


def listed_before(db: Any, params: dict[str, Any]) -> tuple[int, Counter[str]]:
    """``(rows first listed now, {other seed: rows taken from it})`` for the chunk in
    ``temp.chunk``; *params* name the run (``run``) and its seed (``seed``)."""
    fresh = 0
    taken: Counter[str] = Counter()
    for seed, count in db.execute(_LISTED_BEFORE, params).fetchall():
        fresh += count
        if seed is not None and seed != params["seed"]:
            taken[seed] += count
    return fresh, taken
