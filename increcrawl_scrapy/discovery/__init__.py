"""Where a run's URLs come from: sitemaps, feeds and robots.txt read and walked,
the URL rules that keep or drop what they list, and what a run decides once
discovery is over.
"""

from typing import Any


def __getattr__(name: str) -> Any:  # the names of the module this package replaced
    from increcrawl_scrapy.compat import moved_attribute

    return moved_attribute(__name__, name)
