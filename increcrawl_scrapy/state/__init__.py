"""Per-URL crawl state: the only package that speaks SQL.

``StateStore`` is the facade; see ``store.py`` for the parts and
docs/architecture.md for how a second backend plugs in.
"""

from increcrawl_scrapy.schedule.rows import (
    CRAWL_COUNTS,
    RUN_COUNTS,
    MissingResult,
    PageState,
    Recorded,
    RekeyResult,
)
from increcrawl_scrapy.state.errors import StateError, StateLockedError
from increcrawl_scrapy.state.runs import Run
from increcrawl_scrapy.state.sqlite.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from increcrawl_scrapy.state.store import StateStore

__all__ = [
    "APPLICATION_ID",
    "CRAWL_COUNTS",
    "MIGRATIONS",
    "RUN_COUNTS",
    "SCHEMA_VERSION",
    "MissingResult",
    "PageState",
    "Recorded",
    "RekeyResult",
    "Run",
    "StateError",
    "StateLockedError",
    "StateStore",
]
