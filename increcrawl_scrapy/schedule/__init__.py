"""The revisit policy: what a fetch means, when to look again, how often a page
changes, and the plain row types every layer shares. Pure functions, no I/O.
"""

from typing import Any


def __getattr__(name: str) -> Any:  # the names of the module this package replaced
    from increcrawl_scrapy.compat import moved_attribute

    return moved_attribute(__name__, name)
