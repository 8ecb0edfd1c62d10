"""A new item a bounded run (``CLOSESPIDER_*``) could not pair is delivered in that
run, whole: the object the spider yielded (its class, its long fields), not the
short print the state keeps of an item (``pages/pending.py``). Its print is kept,
so that a later run that finds it gone from the page it came from takes it as
moved: its ``gone`` is not delivered (#50, 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
import scrapy
from scrapy import signals

from increcrawl_scrapy.pages.memory import MAX_VALUE
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.conftest import Clock
from tests.crawling import add_on, run_crawl
from tests.embedding.matrix_spiders import TutorialSpider, quote_of

pytestmark = pytest.mark.e2e

HOUR, DAY = 3_600.0, 86_400.0
#: The labels a gone item gets from the run that finds it gone (pipelines.py).
SAME_RUN_GONE_LABELS = (
    "change", "run_id", "normalized_url", "content_hash", "fetched_at", "etag", "last_modified",
)  # fmt: skip
LONG = "\u201c" + "A quote longer than the state keeps of a field, " * 10 + "\u201d"


class Quote(scrapy.Item):
    text = scrapy.Field()
    author = scrapy.Field()
    tags = scrapy.Field()
    # The add-on's labels: a project's item class declares those it wants.
    change = scrapy.Field()
    run_id = scrapy.Field()
    normalized_url = scrapy.Field()
    content_hash = scrapy.Field()
    fetched_at = scrapy.Field()
    etag = scrapy.Field()
    last_modified = scrapy.Field()
    changed_fields = scrapy.Field()


class QuoteItemSpider(TutorialSpider):
    """The tutorial's spider with an item class of its own."""

    name = "quote_items"

    def item(self, block: Any, response: Any) -> Quote:
        return Quote(**quote_of(block))


async def _crawl(db: str, clock: Clock, site: QuotesSite, **more: Any) -> list[Any]:
    """One run; the items as the pipelines handed them on (objects, not copies)."""
    delivered: list[Any] = []
    site.reset_counters()

    def scraped(item: Any) -> None:
        delivered.append(item)

    settings = add_on(db, clock, LOG_LEVEL="INFO", **more)
    result = await run_crawl(
        settings,
        spider_class=QuoteItemSpider,
        hooks={signals.item_scraped: scraped},
        site=site.url,
    )
    assert not [line for line in result.log if "Traceback" in line], result.log[-40:]
    return delivered


def _changes(items: list[Any]) -> list[tuple[str, str]]:
    return sorted((item["change"], str(item.get("text"))) for item in items)


@pytest_twisted.ensureDeferred
async def test_a_new_item_a_bounded_run_cannot_pair_is_delivered_whole(tmp_path: Path) -> None:
    assert len(LONG) > MAX_VALUE
    clock = Clock(1_800_000_000.0)
    db = str(tmp_path / "state.sqlite")
    with QuotesSite(quotes=40) as site:  # four pages, each leading to the next
        assert len(await _crawl(db, clock, site)) == 40
        old = site.delete(15)  # page two: one quote gone, a long one in its place
        site.insert(15, LONG)
        site.edit(25, "\u201cEdited on page three.\u201d")
        clock.advance(2 * DAY)
        # Closed at page three (page one answers 304): page four, where the long
        # quote may have come from, is not seen. The quote is new as far as the
        # run can tell: delivered now, as the spider yielded it.
        first = await _crawl(db, clock, site, CLOSESPIDER_PAGECOUNT=2)
        assert "/page/4/" not in site.requested
        new = [item for item in first if item["change"] == "new"]
        assert [item["text"] for item in new] == [LONG], _changes(first)
        assert type(new[0]) is Quote
        assert new[0]["author"] and new[0]["tags"]
        assert ("changed", "\u201cEdited on page three.\u201d") in _changes(first)
        # The gone quote is held; a run that sees every page delivers it, and
        # nothing else (the long quote was delivered).
        clock.advance(HOUR)
        second = await _crawl(db, clock, site, CLOSESPIDER_PAGECOUNT=2)
        clock.advance(HOUR)
        third = await _crawl(db, clock, site)
        later = _changes(second + third)
        assert later == [("gone", str(old["text"]))], later
        gone = next(item for item in second + third if item["change"] == "gone")
        # Labelled as a gone item delivered by the run that finds it gone is.
        assert set(gone) == {"text", "author", "tags", *SAME_RUN_GONE_LABELS}, gone


@pytest_twisted.ensureDeferred
@pytest.mark.parametrize("key", [None, ["text"]], ids=["prints", "item-key"])
async def test_a_move_whose_new_side_came_first_is_not_delivered_gone(
    tmp_path: Path, key: list[str] | None
) -> None:
    # With a declared key (INCRECRAWL_ITEM_KEY) the quote is the same item wherever
    # it is listed: not new on page two, and not gone from page three.
    keyed = {"INCRECRAWL_ITEM_KEY": key} if key else {}
    clock = Clock(1_800_000_000.0)
    db = str(tmp_path / "state.sqlite")
    with QuotesSite(quotes=30) as site:  # three pages
        site.edit(20, LONG)  # page three's first quote, a long one
        assert len(await _crawl(db, clock, site, **keyed)) == 30
        deleted = site.delete(12)  # page two: the quotes after it move a place up
        clock.advance(2 * DAY)
        # One page answered in full: page two, closed there. The long quote came
        # up from page three, not seen: new as far as this run can tell.
        first = await _crawl(db, clock, site, CLOSESPIDER_PAGECOUNT=1, **keyed)
        assert "/page/3/" not in site.requested
        new = [item for item in first if item["change"] == "new"]
        assert [item["text"] for item in new] == ([] if key else [LONG]), _changes(first)
        assert all(type(item) is Quote for item in new)
        # Page three, read by the next runs, no longer shows it: it moved, and its
        # new side was delivered: no `gone` of it. The deleted one is gone.
        every = _changes(first)
        for _ in range(3):
            clock.advance(HOUR)
            every += _changes(await _crawl(db, clock, site, CLOSESPIDER_PAGECOUNT=1, **keyed))
        clock.advance(2 * DAY)
        every += _changes(await _crawl(db, clock, site, **keyed))
        truth = [("gone", str(deleted["text"]))] + ([] if key else [("new", LONG)])
        assert sorted(every) == sorted(truth), every
