"""Per-URL crawl state: the only package that speaks SQL, and its one door.

``StateStore`` is the crawl's facade and ``StateReader`` the operator's commands'
read-only one (``reports.py``); everything outside this package imports from here,
never from a part. See ``store.py`` for the parts and docs/architecture.md for how
a second backend plugs in.
"""

from increcrawl_scrapy.schedule.rows import (
    CRAWL_COUNTS,
    RUN_COUNTS,
    MissingResult,
    PageState,
    Recorded,
    RekeyResult,
)
from increcrawl_scrapy.state.contents import KeptVersions
from increcrawl_scrapy.state.errors import RunOver, StateError, StateLockedError
from increcrawl_scrapy.state.locations import is_postgres, shown
from increcrawl_scrapy.state.migrate import copy_state, driver_errors
from increcrawl_scrapy.state.queue import CHUNK
from increcrawl_scrapy.state.readings import held_item_key
from increcrawl_scrapy.state.reports import StateReader
from increcrawl_scrapy.state.runs import Run, Validators
from increcrawl_scrapy.state.sqlite.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION
from increcrawl_scrapy.state.store import StateStore

__all__ = [
    "APPLICATION_ID",
    "CHUNK",
    "CRAWL_COUNTS",
    "MIGRATIONS",
    "RUN_COUNTS",
    "SCHEMA_VERSION",
    "KeptVersions",
    "MissingResult",
    "PageState",
    "Recorded",
    "RekeyResult",
    "Run",
    "RunOver",
    "StateError",
    "StateLockedError",
    "StateReader",
    "StateStore",
    "Validators",
    "copy_state",
    "driver_errors",
    "held_item_key",
    "is_postgres",
    "shown",
]
