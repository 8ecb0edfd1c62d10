"""A listing of a project's crawl: a page that yields requests and no items (a
category page, the home page, a pager). Its links are its content: it is recorded
as a page with state, fingerprinted by the links its main content leads to (the
site's navigation is not its own), so that it is skipped while it is not due, the
requests it led to made again (``skip_not_due.py``), asked conditionally when it is
due, and its learned schedule follows how often its links move. Without state it
was fetched on every run, however seldom its links changed.

Only HTML pages: a sitemap (which the ``SitemapSpider`` reads) is read every run,
and a page that yields nothing at all has no state, as before; nor is a page whose
state holds items (a page of items answering without them keeps their memory), a
postback's answer or the HTTP cache's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.http import HtmlResponse

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import Memory, unpack
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


def is_listing(response: Response, links: set[str]) -> bool:
    """Whether *response*, which yielded no items, is a listing with state."""
    return bool(links) and isinstance(response, HtmlResponse) and 200 <= response.status < 300


def listing_text(links: set[str]) -> str:
    """What a listing's fingerprint is taken of: its own links, as a page's are."""
    return "\n\nlinks:\n" + "\n".join(sorted(links))


async def record_listing(
    crawler: Crawler,
    response: Response,
    links: set[str],
    requests: list[dict[str, Any]] | None,
    patterns: Any,
) -> None:
    """Record the listing *response* (its own *links*, the *requests* it produced),
    written at once: it has no item to deliver."""
    try:
        state = crawl_state(crawler)
        store = state.store
        key = store.normalize(response.url)
    except (StateLockedError, ValueError):  # the database in use; not a page URL
        return
    if store.shared and not store.known(key):
        await compat.in_thread(store.load, [key])
    kept = await compat.in_thread(store.memory, response.url) if store.shared else None
    previous = unpack(kept if store.shared else store.memory(response.url))
    if previous is not None and previous.items:
        # A page of items that answered without them (a page still loading, a page
        # emptied): its items' memory is kept, as before listings had state.
        return
    text = listing_text(links)
    # A user's volatile rules may backtrack: off the reactor's thread, as pages' are.
    content_hash = (
        await compat.in_thread(content_fingerprint, text, patterns)
        if patterns
        else content_fingerprint(text, patterns)
    )
    recorded = store.record(
        response.url,
        response.status,
        seed=state.seed,
        key=key,
        content_hash=content_hash,
        validators=state.validators.pop(response.url, None),
        memory=Memory([], requests, own=True).pack(),
    )
    stats.inc(crawler.stats, stats.LISTINGS, change=recorded.outcome.change)
