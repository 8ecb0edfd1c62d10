"""What the state's unit tests share: the seed, units of time, and a run's discovery
of a list of URLs."""

from __future__ import annotations

from increcrawl_scrapy.state import StateStore

HOUR, DAY = 3600.0, 86400.0
SEED = "https://example.com/sitemap.xml"


def discover(store: StateStore, seed: str, urls: list[str], lastmod: str | None = None) -> int:
    run = store.start_run(seed)
    run.upsert([(u, lastmod) for u in urls])
    run.apply_lastmod()
    return run
