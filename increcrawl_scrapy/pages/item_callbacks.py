"""The spider's callbacks that yield items (issue #50, item 12): a listing of one of
them (a response of links only) is never skipped (``skip_not_due.py``).

A shop's category pages share one callback; a category empty on its first fetch
yields links only, as a listing does, yet an item moving into it must be seen the
run it moves, or it is delivered ``gone`` from its old page and ``new`` a run later.
So the rule is the callback's, not the response's: once a callback yields an item,
a listing it made (before or after) is fetched every run, as before listings had
schedules, and becomes a page of items once it yields one. The rule is kept at
skip time only: a listing row stays what it is, counted as a listing.
A callback is known by its name (a ``CrawlSpider`` rule's by its index); the names
are kept in the state per spider (``remember``), read when the spider opens, so
the rule holds from the next run whatever order this run's responses came in."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy import compat
from increcrawl_scrapy.crawl.shared_state import CrawlState

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

_NAME = "item_callbacks:{spider}"


def callback_of(request: Request) -> str:
    """The name of *request*'s callback (``parse`` when it has none)."""
    name = getattr(request.callback, "__name__", None) or "parse"
    rule = request.meta.get("rule")
    return f"{name}#{rule}" if name == "_callback" and rule is not None else name


def _key(crawler: Crawler) -> str:
    return _NAME.format(spider=getattr(crawler.spider, "name", ""))


async def load(crawler: Crawler, state: CrawlState) -> set[str]:
    """The item callbacks kept by earlier runs and found by this one (read off the
    reactor's thread, once a crawl)."""
    if state.item_callbacks is None:
        raw = await compat.in_thread(state.store.remembered, _key(crawler))
        if state.item_callbacks is None:  # another read meanwhile
            state.item_callbacks = set(json.loads(raw)) if raw else set()
    return state.item_callbacks


def known(state: CrawlState) -> set[str]:
    """The item callbacks read so far (none before ``load``)."""
    return state.item_callbacks or set()


async def note(crawler: Crawler, state: CrawlState, request: Request) -> None:
    """*request*'s callback yielded items: kept for this run and the next."""
    callbacks = await load(crawler, state)
    name = callback_of(request)
    if name not in callbacks:
        callbacks.add(name)
        await compat.in_thread(state.store.remember, _key(crawler), json.dumps(sorted(callbacks)))


def yields_items(request: Any, state: CrawlState) -> bool:
    """Whether *request*'s callback is one that yields items."""
    return callback_of(request) in known(state)
