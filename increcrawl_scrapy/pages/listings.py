"""Listing pages in an existing project (issue #50, item 12): a blog's home, its
pagination, category, tag and author pages, a documentation index.

With ``INCRECRAWL_SKIP_NOT_DUE``, an HTML response whose callback produced requests
but no items is a listing: its links' changes are its content. It gets a state row
and a memory as an item page does (the request that reached it and the requests it
produced, ``pages/memory.py``), so it is skipped while it is not due and its requests
are replayed (``skip_not_due.py``). Its fingerprint is the sorted canonical URLs of
its requests; its outcome (new, changed, unchanged) feeds its learned schedule as
any page's does, and it delivers no item. A listing never waits longer than
``UNREACHED_AGE`` or ``INCRECRAWL_MAX_INTERVAL``, the shorter, between fetches
(``overdue``: due at 90% of it, so daily runs that start within 12 hours of each
other's hour keep a 5 days' bound): a page added to the site is found within that.

Not listings, fetched every run as before: anything but HTML (a SitemapSpider's
sitemaps, robots.txt, XML, JSON), so a page added to a sitemap is found the next
run; a response whose requests could not be kept (``kept_requests.request_data``), or
that posted a form or asked with a body (a login page's form carries a token of
the moment, not a link to replay); a response whose requests pass data on (non-empty
``cb_kwargs``, meta other than Scrapy's and ours: an item built across two pages,
whose first page's content is that data, stale in a replay); a page that produced
items before (its memory holds them: an item page yielding none now is not turned
into a listing, its items stay its own); the ``incremental`` spider's pages (it
keeps its own queue). A listing of a callback that yields items on other pages (a
category page empty for now) is recorded as one but never skipped: fetched every
run as before, so an item moving into it is seen the run it moves
(``item_callbacks.py``); once it yields items it is a page of items.

A start URL that is a listing is skipped while not due as any listing (and says so
in the log, as a skipped start request does); ``increcrawl_always`` in a request's
meta opts it out, and ``dont_filter`` does not, as for item pages. A listing asked
again in a run that fetched it is fetched again as Scrapy asks (after a login its
links are others), its latest version recorded: an item page's other URL is not.

A replay from a skipped page fetched within ``UNREACHED_AGE`` (``recent``) reaches
the pages it leads to: the page listed them that recently, and a listing is read
again within that age, so a deleted page drops out of every recent memory and is
then checked directly (``pages/unreached.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.http import HtmlResponse, TextResponse

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for, skips_not_due
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.pages import item_callbacks
from increcrawl_scrapy.pages.http_cache import is_cached
from increcrawl_scrapy.pages.kept_requests import kept_request
from increcrawl_scrapy.pages.memory import Memory, unpack
from increcrawl_scrapy.pages.passed_data import passes_data
from increcrawl_scrapy.pages.postbacks import is_postback
from increcrawl_scrapy.pages.unreached import UNREACHED_AGE
from increcrawl_scrapy.scope import is_incremental
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.schedule.rows import PageState

#: Read again on the first run past this share of the longest wait: for 5 days,
#: 4.5, so daily runs starting within 12 hours of each other's hour (one late, a
#: listing recorded some minutes into its run) read it on the run at its age, not
#: the one after; a wait of an hour gives 6 minutes, not every run.
OVERDUE_SHARE = 0.9


def is_listing(memory: Memory | None) -> bool:
    """A listing's memory whose requests may stand for its fetch (``listing`` set by
    ``record_listing``; a listing fetched whenever asked has requests None)."""
    return memory is not None and memory.listing and bool(memory.requests)


def first_count(crawler: Crawler, key: str) -> bool:
    """Whether the listing *key* is counted now: a listing fetched again in a run (a
    login's, a link home after its start request) is one page reached."""
    counted: set[str] = compat.of_crawl(crawler, "listings_counted", set)
    if key in counted:
        return False
    counted.add(key)
    return True


def longest_wait(crawler: Crawler) -> float:
    """The longest a listing waits between fetches."""
    return min(UNREACHED_AGE, config_for(crawler).max_interval)


def overdue(crawler: Crawler, page: PageState, memory: Memory | None, now: float) -> bool:
    """A listing not fetched for its longest wait: fetched, whatever its schedule."""
    if not is_listing(memory) or page.last_fetched is None:
        return False
    return now - page.last_fetched >= longest_wait(crawler) * OVERDUE_SHARE


def recent(page: PageState, now: float) -> bool:
    """*page* was fetched within ``UNREACHED_AGE``: its replayed requests reach the
    pages they lead to."""
    return page.last_fetched is not None and now - page.last_fetched <= UNREACHED_AGE


def _html(response: Response) -> bool:
    if isinstance(response, HtmlResponse):
        return True
    kind = response.headers.get("Content-Type", b"") or b""
    return isinstance(response, TextResponse) and kind.split(b";")[0].strip() == b"text/html"


def _plain_gets(requests: list[dict[str, Any]]) -> bool:
    return all(data.get("method", "GET") == "GET" and not data.get("body") for data in requests)


def sets_cookies(crawler: Crawler, response: Response) -> bool:
    """A response that sets a cookie: the pages it leads to may want it (a session
    begun on the first visit, an age gate), and a replay would ask without it."""
    return crawler.settings.getbool("COOKIES_ENABLED") and bool(
        response.headers.getlist("Set-Cookie")
    )


def _skipping(crawler: Crawler) -> bool:
    """A project's own spider skipping pages not due: listings are kept."""
    return skips_not_due(crawler) and not is_incremental(crawler.spider)


def _may_be_listing(
    crawler: Crawler, response: Response, requests: list[dict[str, Any]] | None
) -> bool:
    """Whether *response*, which produced *requests* and no items, may be recorded
    as a listing (the module's docstring)."""
    return bool(
        requests
        and 200 <= response.status < 300
        and response.request is not None
        and not is_postback(response.request)
        and not is_cached(response)
        and _html(response)
        and not sets_cookies(crawler, response)
        and _plain_gets(requests)
        and not any(passes_data(data) for data in requests)
    )


async def record_listing(
    crawler: Crawler,
    response: Response,
    items: list[Any],
    requests: list[dict[str, Any]] | None,
    links: set[str],
) -> None:
    """Record *response*'s page as a listing of *links* (canonical URLs), with its
    *requests*, if it is one: no *items*, and not a page of items before (its
    memory says so). A response with items makes its callback an item callback
    (``item_callbacks.py``). A listing's row answered by what is no listing now (a
    cookie set, its requests not kept or passing data) is recorded as one fetched
    whenever asked; a run that does not skip records the listings' rows it has."""
    asked = response.request
    if asked is None or is_incremental(crawler.spider) or not (items or links):
        return
    skipping = _skipping(crawler)
    try:
        state = crawl_state(crawler)
        store = state.store
        key = store.normalize(response.url)
    except (StateLockedError, ValueError):  # the database in use; not a page URL
        return
    if items:
        if skipping:
            await item_callbacks.note(crawler, state, asked)
        return
    listing = _may_be_listing(crawler, response, requests)
    if not (listing or (skipping and 200 <= response.status < 300 and not is_postback(asked))):
        return
    if store.shared and not store.known(key):  # rows read off the reactor's thread
        await compat.in_thread(store.load, [key])
    page, blob = store.get(response.url), None
    if page is not None and store.shared:
        blob = await compat.in_thread(store.memory, response.url)
    elif page is not None:
        blob = store.memory(response.url)
    memory = unpack(blob)
    kept_listing = memory is not None and memory.listing
    if page is not None and page.fetch_count and not page.gone and not kept_listing:
        return  # a page of items (its memory holds them), or kept by an older version
    if not kept_listing and not (skipping and listing):
        return  # rows are made for listings only while skipping
    config = config_for(crawler)
    text = "links:\n" + "\n".join(sorted(links))
    kept = kept_request(asked, crawler.spider)
    recorded = store.record(
        response.url,
        response.status,
        seed=state.seed,
        key=key,
        content_hash=content_fingerprint(text, config.volatile_patterns),
        validators=state.validators.pop(response.url, None),
        content=text if config.keep_content else None,
        memory=Memory(
            [], requests if listing else None, own=True, request=kept, listing=True
        ).pack(),
    )
    if first_count(crawler, key):
        stats.inc_result(crawler.stats, recorded.outcome.change, never_found=recorded.never_found)
        stats.inc(crawler.stats, stats.LISTINGS, change=recorded.outcome.change)
