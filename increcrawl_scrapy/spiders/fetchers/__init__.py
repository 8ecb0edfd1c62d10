"""The incremental spider's fetchers (``base.Fetcher``): direct, Geonode extracts,
Geonode with batch jobs, hybrid. ``fetcher_for`` picks the crawl's one."""

from __future__ import annotations

from increcrawl_scrapy.spiders.fetchers.base import Fetcher, FetchInputs
from increcrawl_scrapy.spiders.fetchers.direct import DirectFetcher
from increcrawl_scrapy.spiders.fetchers.geonode import BatchGeonodeFetcher, GeonodeFetcher
from increcrawl_scrapy.spiders.fetchers.hybrid import HybridFetcher

__all__ = [
    "BatchGeonodeFetcher",
    "DirectFetcher",
    "FetchInputs",
    "Fetcher",
    "GeonodeFetcher",
    "HybridFetcher",
    "fetcher_for",
]


def fetcher_for(inputs: FetchInputs, chunk: int) -> Fetcher:
    """The crawl's fetcher, from ``INCRECRAWL_FETCHER`` (``auto``: Geonode with a key)
    and the due rows read at a time (*chunk*): batch jobs only when a chunk can
    hold ``GEONODE_BATCH_MIN_URLS`` rows."""
    config = inputs.config
    if not config.uses_geonode:
        return DirectFetcher(inputs)
    if config.hybrid:  # probes go one by one: never a batch
        return HybridFetcher(inputs)
    if chunk < config.batch_min_urls:
        return GeonodeFetcher(inputs)
    return BatchGeonodeFetcher(inputs)
