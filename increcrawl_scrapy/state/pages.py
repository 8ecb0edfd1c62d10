"""Reading ``pages`` rows into ``PageState``: the one column list every reader uses."""

from __future__ import annotations

import json
from typing import Any

from increcrawl_scrapy.schedule.rows import PAGE_COLUMNS, RESULT_COLUMNS, PageState
from increcrawl_scrapy.state.backend import Session

_GONE = PAGE_COLUMNS.index("gone")
_MOVED = PAGE_COLUMNS.index("lastmod_moved")
SELECT_PAGE = ", ".join(PAGE_COLUMNS)
#: The columns a result writes on a row it inserts.
RESULT_INSERT = ("normalized_url", "url", "seed", "first_seen", "host", *RESULT_COLUMNS)


def rows_by_key(database: Session, keys: list[str]) -> dict[str, PageState]:
    """The stored rows of *keys* (those that exist), by key: one statement."""
    rows = database.tuples(database.sql.pages_by_keys, (json.dumps(keys),))
    return {page.normalized_url: page for page in map(page_of, rows)}


def page_of(row: tuple[Any, ...]) -> PageState:
    values = list(row)
    values[_GONE] = bool(values[_GONE])
    values[_MOVED] = bool(values[_MOVED])
    return PageState._make(values)
