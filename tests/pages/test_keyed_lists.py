"""Two crawls at once on one PostgreSQL state (two cron jobs, two nodes) keep each
other's entries in the lists of the pages a declared key is on (``pages/keyed.py``):
a page one crawl adds to a key's list is not lost by the other's write, read before
it. Two stores on one database, interleaved by hand (a whole crawl's timing is not
deterministic): both read the key's list before either writes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest_twisted
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler

from increcrawl_scrapy import compat
from increcrawl_scrapy.pages.keyed import KeyedSite, keyed_print
from increcrawl_scrapy.pages.memory import Memory
from increcrawl_scrapy.pages.page import Page
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock

SITE = "https://quotes.example"
FIELDS = ("text",)
X = keyed_print({"text": "X"}, "text=X", ())


def _keys_of(store: StateStore) -> KeyedSite:
    """A crawl's keys of the site's, on *store* (its crawl's state)."""
    crawler = get_crawler()
    compat.kept_of_crawl(crawler)["state"] = SimpleNamespace(store=store)
    return KeyedSite(crawler, FIELDS)


def _page(n: int) -> Page:
    page = Page(url=f"{SITE}/page/{n}/", size=1, text="")
    page.keyed_by_site = True  # items without a URL field: their keys are the site's
    return page


async def _left(keys: KeyedSite, n: int, before: bytes | None, now: list) -> list:
    """The keys page *n* dropped that no other page lists (``KeyedSite.left``)."""
    return await deferred_from_coro(keys.left(_page(n), None, before, now))


def _listing_x() -> bytes:
    return Memory([X], []).pack()


@pytest_twisted.ensureDeferred
async def test_two_crawls_adding_pages_to_one_keys_list_keep_both(
    postgres_dsn: str, clock: Clock
) -> None:
    # Crawl A finds X new on page two, crawl B (overlapping) on page three: each reads
    # X's list before the other wrote. Then a third crawl finds X gone from page
    # three: page two, not read again, still lists it, so X is not gone.
    with StateStore(postgres_dsn, clock=clock) as a, StateStore(postgres_dsn, clock=clock) as b:
        assert await _left(_keys_of(a), 2, None, [X]) == []
        assert await _left(_keys_of(b), 3, None, [X]) == []
        a.keep_memory(a.normalize(_page(2).url), _listing_x(), recorded=False)
        b.keep_memory(b.normalize(_page(3).url), _listing_x(), recorded=False)
        a.flush()
        b.flush()
    with StateStore(postgres_dsn, clock=clock) as third:
        assert await _left(_keys_of(third), 3, _listing_x(), []) == []


@pytest_twisted.ensureDeferred
async def test_a_crawl_taking_a_page_off_a_keys_list_keeps_the_others_new_page(
    postgres_dsn: str, clock: Clock
) -> None:
    # X on pages two and four. Crawl A finds it gone from page two while crawl B
    # finds it new on page three (both read X's list first; B writes first). A's
    # write must not drop page three: when page four drops X later, page three
    # still lists it, and X is not gone.
    with StateStore(postgres_dsn, clock=clock) as first:
        for n in (2, 4):
            assert await _left(_keys_of(first), n, None, [X]) == []
            first.keep_memory(first.normalize(_page(n).url), _listing_x(), recorded=False)
        first.flush()
    with StateStore(postgres_dsn, clock=clock) as a, StateStore(postgres_dsn, clock=clock) as b:
        keys_a, keys_b = _keys_of(a), _keys_of(b)
        assert await _left(keys_b, 3, None, [X]) == []
        assert await _left(keys_a, 2, _listing_x(), []) == []  # page four lists it
        b.keep_memory(b.normalize(_page(3).url), _listing_x(), recorded=False)
        a.keep_memory(a.normalize(_page(2).url), Memory([], []).pack(), recorded=False)
        b.flush()
        a.flush()
    with StateStore(postgres_dsn, clock=clock) as third:
        assert await _left(_keys_of(third), 4, _listing_x(), []) == []


@pytest_twisted.ensureDeferred
async def test_a_keys_list_kept_whole_by_an_earlier_build_is_taken_over(
    tmp_path: Path, clock: Clock
) -> None:
    # An earlier build kept X's list as one memory (its pages, a line each): page two
    # on it, page two's memory listing X. Page three drops X: page two still lists
    # it, X is not gone. Then page two drops it too: X is gone.
    with StateStore(tmp_path / "state.sqlite", clock=clock) as store:
        two = store.normalize(_page(2).url)
        store.keep_memory(f"{SITE}/#listed:{X.whole}", two.encode(), recorded=False)
        store.keep_memory(two, _listing_x(), recorded=False)
        store.flush()
        keys = _keys_of(store)
        assert await _left(keys, 3, _listing_x(), []) == []
        store.flush()
        assert await _left(_keys_of(store), 2, _listing_x(), []) == [X]
