"""Loopback stand-ins for offline tests: a Geonode Scraper API and a sample site.

Importable by users' own tests::

    from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
"""

from __future__ import annotations

from typing import Any

__all__ = ["GeonodeStandIn", "SampleSite"]


def __getattr__(name: str) -> Any:
    # Imported lazily so ``python -m increcrawl_scrapy.testing.geonode`` runs cleanly.
    if name == "GeonodeStandIn":
        from increcrawl_scrapy.testing.geonode import GeonodeStandIn

        return GeonodeStandIn
    if name == "SampleSite":
        from increcrawl_scrapy.testing.site import SampleSite

        return SampleSite
    raise AttributeError(name)
