"""What a discovery chunk says before it is applied: how many of its rows this run
had not listed yet (the same URL in two sitemaps, or the same sitemap under two
names, is one discovered URL), and whose rows it takes from another seed."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from increcrawl_scrapy.state.backend import Session


def listed_before(db: Session, params: dict[str, Any]) -> tuple[int, Counter[str]]:
    """``(rows first listed now, {other seed: rows taken from it})`` for the chunk in
    the chunk table; *params* name the run (``run``) and its seed (``seed``)."""
    fresh = 0
    taken: Counter[str] = Counter()
    for seed, count in db.execute(db.sql.listed_before, params).fetchall():
        fresh += count
        if seed is not None and seed != params["seed"]:
            taken[seed] += count
    return fresh, taken
