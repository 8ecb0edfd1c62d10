"""Reading ``pages`` rows into ``PageState``: the one column list every reader uses."""

from __future__ import annotations

from typing import Any

from increcrawl_scrapy.rows import PAGE_COLUMNS, PageState

_GONE = PAGE_COLUMNS.index("gone")
_MOVED = PAGE_COLUMNS.index("lastmod_moved")
SELECT_PAGE = ", ".join(PAGE_COLUMNS)


def rows_by_key(database: Any, keys: list[str]) -> dict[str, PageState]:
    """The stored rows of *keys* (those that exist), by key: one statement."""
    marks = ", ".join("?" for _ in keys)
    rows = database.tuples(
        f"SELECT {SELECT_PAGE} FROM pages WHERE normalized_url IN ({marks})", keys
    )
    return {page.normalized_url: page for page in map(page_of, rows)}


def page_of(row: tuple[Any, ...]) -> PageState:
    values = list(row)
    values[_GONE] = bool(values[_GONE])
    values[_MOVED] = bool(values[_MOVED])
    return PageState._make(values)
