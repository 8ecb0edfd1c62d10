"""A fetched response's text and the links of its main content, for the spider and
the add-on alike. CPU work (parsing, extraction, conversion, the fingerprint), run on
the content thread (``compat.in_content_thread``) or, for the spider's pages past a
crawl's first, in a worker process (``content_processes.py``), never on the
reactor's."""

from __future__ import annotations

import contextlib
import logging
import traceback
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin

from scrapy.http import Response, TextResponse
from scrapy.utils.response import get_base_url
from w3lib.url import canonicalize_url

from increcrawl_scrapy import stats
from increcrawl_scrapy.content.fingerprint import content_fingerprint, digest
from increcrawl_scrapy.content.page_text import (
    ContentFailed,
    ContentOptions,
    EmptyDocument,
    PageText,
    UnusablePage,
    page_text,
)

logger = logging.getLogger(__name__)


def response_text(response: Response, options: ContentOptions) -> PageText:
    """The page's text, whoever fetched it, so both paths hash the same text: decoded
    the way Scrapy decodes it (header, BOM, meta, then detection)."""
    if not response.body.strip() and "geonode" not in response.flags:
        # The origin sent nothing: a truncated answer, a server mid-deploy, whatever
        # its type (HTML already parses to no document), not the page's text.
        raise EmptyDocument(f"no document in its {len(response.body)} bytes (an empty body)")
    text = response.text if isinstance(response, TextResponse) else None
    value = response.headers.get("Content-Type")
    return page_text(response.body, value.decode("latin-1") if value else None, text, options)


def main_links(response: Response, options: ContentOptions) -> frozenset[str] | None:
    """The links of *response*'s main content, by the rules of its text
    (``page_text``), as canonical absolute URLs; None when its text has no main
    content to tell them by (not HTML, the whole page, an unusable body); raises
    ContentFailed when a library failed on its text."""
    try:
        found = with_print(False, response_text, response, options)[0]
    except ContentFailed:
        raise
    except UnusablePage:
        return None
    if found.links is None:
        return None
    base = get_base_url(response) if isinstance(response, TextResponse) else response.url
    links = set()
    for href in found.links:
        with contextlib.suppress(ValueError):
            links.add(canonicalize_url(urljoin(base, href)))
    return frozenset(links)


def links_failed(collector: Any, url: str, error: ContentFailed) -> None:
    """A library failed on the text that tells a response's own links (the add-on's
    ``main_links``): counted and said with where it failed; the page keeps its items,
    every link it led to taken as its own."""
    stats.inc(collector, error.stat)
    logger.warning(
        "%s: %s; every link it led to is taken as its own\n%s", url, error, error.trace.rstrip()
    )


def with_print(
    fingerprint: bool, take: Callable[..., PageText], *args: Any
) -> tuple[PageText, str | None]:
    """A page's text by *take*, with its fingerprint when asked (the default rules
    are linear: taken with the text, they spare the reactor's thread)."""
    try:
        found = take(*args)
    except UnusablePage:
        raise
    except Exception as exc:  # any library's, on this page's markup
        raise ContentFailed(
            f"its text could not be taken ({type(exc).__name__}: {exc})",
            "".join(traceback.format_exception(exc)),
            type(exc).__name__,
        ) from exc
    if not fingerprint:
        return found, None
    if found.stable is not None:  # measured already (a page without <main>)
        return found, digest(found.stable)
    return found, content_fingerprint(found.text)
