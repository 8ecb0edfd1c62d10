"""A page crawled before that answers 404 or 410, in a project using the add-on:
it is gone, as the ``incremental`` spider's pages are.

Scrapy's ``HttpErrorMiddleware`` would ignore the response, and the page's state
would never hear of it: due every run, its items never reported. Instead, once,
each item its last fetch yielded (its memory, ``pages/memory.py``) is delivered
``gone`` (``PageItemsMiddleware`` makes them as it makes an item gone from a page),
and the page's result is recorded ``gone`` once they are delivered: re-checked
slowly from then on (``schedule/policy.py``), ``new`` again if it answers. A page
already gone, or whose memory holds no items, is recorded at once, nothing
delivered. A request that was not a page with state is left as it was, and so is a
spider that handles the status itself (``HTTPERROR_ALLOWED_CODES``,
``handle_httpstatus_list``): it gets its response as before. A page the check of
unreached pages found moved (``pages/unreached.py``: a permanent redirect within the
site) is gone from its URL the same way, recorded as a 410.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

from scrapy.spidermiddlewares.httperror import HttpError, HttpErrorMiddleware

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages.memory import ItemPrint, Memory, unpack
from increcrawl_scrapy.pages.page import Page
from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.pages.keyed import KeyedSite


#: Set in the request's meta once its gone page was taken care of (an errback's
#: output and an exception could both bring it).
TAKEN = "increcrawl_gone_taken"
#: The status a moved page is recorded with: gone from its URL (a 301 or 308 would
#: be an error to the schedule, ``schedule/policy.py``).
MOVED_STATUS = 410
#: The page's memory, read ahead off the reactor's thread on a shared state
#: (``skip_not_due.py``): there the row is loaded too.
GONE_MEMORY = "increcrawl_gone_memory"


def gone_memory(crawler: Crawler, response: Response, moved: bool = False) -> Memory | None:
    """The memory whose items are to be delivered gone, when *response* is a 404 or
    410 of a page with state, not gone yet, that Scrapy ignores (or the answer of a
    page *moved*); None otherwise (a page already gone, or without items, is
    recorded here, and TAKEN set in the meta)."""
    if response.meta.get(TAKEN):
        return None
    if not moved and response.status not in GONE_STATUSES:
        return None
    if not moved and not ignored_by_scrapy(crawler, response):
        return None  # the spider handles the status itself
    try:
        state = crawl_state(crawler)
        store = state.store
        store.normalize(response.url)  # raises ValueError for no page URL
    except (StateLockedError, ValueError):  # the database in use; not a page URL
        return None
    read_ahead = GONE_MEMORY in response.meta
    if store.shared and not read_ahead:
        return None  # never a read on the reactor's thread (skip_not_due.py reads ahead)
    page = store.get(response.url)
    if page is None or not page.fetch_count:
        return None  # never produced items: not a page with state
    memory = unpack(response.meta[GONE_MEMORY] if read_ahead else store.memory(response.url))
    if memory is not None and not memory.own:
        # Its items came from another response (a listing's, by their URL field):
        # that page, not this answer, says they are gone.
        return None
    response.meta[TAKEN] = True
    if memory is not None and memory.items and not page.gone:
        return memory
    record_gone(crawler, response, moved, listing=memory is not None and memory.listing)
    return None


def record_gone(
    crawler: Crawler, response: Response, moved: bool = False, listing: bool = False
) -> None:
    """*response*'s page recorded gone at once: nothing of it to deliver. A
    *listing* gone stays one, fetched whenever asked (``left_by_gone_page``)."""
    try:
        state = crawl_state(crawler)
        key = state.store.normalize(response.url)
    except (StateLockedError, ValueError):
        return
    status = MOVED_STATUS if moved else response.status
    recorded = state.store.record(
        response.url, status, seed=state.seed, key=key, memory=left_by_gone_page(listing)
    )
    stats.inc_result(crawler.stats, recorded.outcome.change, never_found=recorded.never_found)


def gone_page(response: Response, memory: Memory, moved: bool = False) -> Page:
    """The page a gone answer stands for: its items, gone, are its members (no items
    left in its memory: back, they are new)."""
    status = MOVED_STATUS if moved else response.status
    page = Page(url=response.url, size=0, text="", status=status)
    page.memory, page.matched, page.held_over = left_by_gone_page(), True, memory.held
    return page


async def gone_prints(
    crawler: Crawler, keyed: KeyedSite, response: Response, memory: Memory, moved: bool
) -> list[ItemPrint]:
    """The items *memory* held, once each (not once a version: an item a listing lists
    too, ``versions.py``). With a declared key (``INCRECRAWL_ITEM_KEY``), only those
    no other page lists any more, as a key a page drops (``keyed.py``): a key that
    moved, or that a page not read again still lists, is not gone. None left: the
    page is recorded gone at once."""
    items = memory.versions()[0]
    if config_for(crawler).item_key:
        items = await keyed.gone_page(response.url, items)
        if not items:
            record_gone(crawler, response, moved)
    return items


def ignored_by_scrapy(crawler: Crawler, response: Response) -> bool:
    """Whether Scrapy's ``HttpErrorMiddleware`` ignores *response*, by its own rule
    (``HTTPERROR_ALLOWED_CODES``, ``HTTPERROR_ALLOW_ALL``, ``handle_httpstatus_list``
    or ``handle_httpstatus_all`` in the request's meta or on the spider)."""
    found = compat.component(crawler, crawler.get_spider_middleware, HttpErrorMiddleware)
    if found is None:
        return False  # disabled: the spider gets every response
    check = found.process_spider_input
    spider = inspect.signature(check).parameters.get("spider")
    try:
        if spider is not None and spider.default is inspect.Parameter.empty:
            check(response, crawler.spider)  # Scrapy before 2.14
        else:
            check(response)
    except HttpError:
        return True
    return False


def left_by_gone_page(listing: bool = False) -> bytes:
    """A gone page's memory: no items (back, they are new), no requests (skipped
    while it is not due, nothing to make again). A gone *listing*'s requests are
    None: fetched whenever asked, as it was before it had a row (a home page that
    answered 404 for one run is the way to the site the next)."""
    return Memory([], None if listing else [], listing=listing).pack()
