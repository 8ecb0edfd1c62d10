"""The extraction libraries' loggers, set to the crawl's ``LOG_LEVEL``.

trafilatura logs its steps on every page it extracts at DEBUG. Scrapy's root logger
passes every level on to its handler (``LOG_LEVEL`` is the handler's), so each of
those messages is made, with its caller looked up, and then dropped: about 1% of a
first run on pages that mark no main content. Scrapy quiets chatty libraries the same
way (its ``DEFAULT_LOGGING`` sets twisted's and hpack's levels).
"""

from __future__ import annotations

import logging
from typing import Any

#: trafilatura and the libraries it calls on every page (htmldate's logger is set to
#: WARNING by trafilatura itself, when imported: left as it is).
LIBRARIES = ("trafilatura", "courlan", "justext")

#: The loggers whose level this module set (and the level): a user's own is kept.
_set: dict[str, int] = {}


def follow_log_level(settings: Any) -> None:
    """Set the libraries' loggers to the crawl's ``LOG_LEVEL`` (left alone at DEBUG,
    and where the user set one)."""
    level = settings.get("LOG_LEVEL", logging.DEBUG)
    if isinstance(level, str):
        level = logging.getLevelName(level.strip().upper())  # a known name's number
    if not isinstance(level, int):
        return  # not a level Scrapy would accept either
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        if logger.level != _set.get(name, logging.NOTSET):
            continue  # the user's
        wanted = level if level > logging.DEBUG else logging.NOTSET
        logger.setLevel(wanted)
        _set[name] = wanted
