"""A page's validators, both ways: the conditional headers a request for it carries,
and the ones a response gave. Shared by the ``incremental`` spider and an embedding
project's pages (``pages/skip_not_due.py``), which neither depends on the other."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.http import Response

    from increcrawl_scrapy.schedule.rows import PageState


def conditions(page: PageState) -> dict[str, str]:
    """Conditional headers for a page; none for a gone page (it may be back), nor for
    one whose fingerprint is of an old text scheme: a 304 would keep the old mark, and
    the page's first edit, however late, would become its new baseline silently. Its
    body is read whole to take the new baseline now (``Results.record``)."""
    headers: dict[str, str] = {}
    if page.gone or page.fingerprint_old:
        return headers
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    return headers


def header_of(response: Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None
