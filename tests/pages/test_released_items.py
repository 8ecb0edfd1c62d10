"""Which earlier runs' items a release delivered (``pages/released.py``), told by
Scrapy's signals as a crawl sends them: a row leaves the state once its item is
known delivered, whatever object a later pipeline handed on, never on a guess."""

from __future__ import annotations

from typing import Any

from scrapy import signals
from scrapy.http import TextResponse
from scrapy.utils.test import get_crawler

from increcrawl_scrapy.pages.released import ReleasedItems
from increcrawl_scrapy.state import held_item_key


class Recorded(ReleasedItems):
    def __init__(self, crawler: Any) -> None:
        super().__init__(crawler)
        self.deleted: list[str] = []

    def _drop(self, row: str) -> None:
        self.deleted.append(row)


def _released(earlier: int, own: int) -> tuple[Any, Recorded, TextResponse, list[dict]]:
    crawler = get_crawler()
    released = Recorded(crawler)
    items = [{"text": f"gone {i}", "change": "gone"} for i in range(earlier)]
    items += [{"text": f"own {i}", "change": "new"} for i in range(own)]
    released.expect({id(item): f"row{i}" for i, item in enumerate(items[:earlier])})
    response = TextResponse("data:,", body=b"")
    released.handed(response, items)
    return crawler, released, response, items


def _send(crawler: Any, signal: Any, item: Any, response: Any) -> None:
    crawler.signals.send_catch_log(signal, item=item, response=response, spider=None)


def test_copies_of_a_release_are_delivered_once_every_item_had_its_signal() -> None:
    crawler, released, response, items = _released(earlier=2, own=1)
    _send(crawler, signals.item_scraped, {"quote": "cleaned 0"}, response)
    _send(crawler, signals.item_dropped, items[1], response)  # the object yielded
    _send(crawler, signals.item_scraped, {"quote": "cleaned own"}, response)
    assert released.deleted == []
    assert released.on_their_way() == {"row1"}  # dropped: released again
    assert released.deleted == ["row0"]


def test_the_object_itself_is_delivered_at_once() -> None:
    crawler, released, response, items = _released(earlier=2, own=0)
    _send(crawler, signals.item_scraped, items[1], response)
    assert released.deleted == ["row1"]
    assert released.on_their_way() == {"row0"}  # its signal not come: not delivered


def test_a_release_that_does_not_add_up_delivers_no_copy() -> None:
    # A failure naming an object never yielded may be one of them; a signal too
    # many (an item a spider middleware added) says nothing of the rest either.
    for extra in (signals.item_error, signals.item_scraped):
        crawler, released, response, _ = _released(earlier=2, own=1)
        for copy in ({"a": 1}, {"b": 2}):
            _send(crawler, signals.item_scraped, copy, response)
        _send(crawler, extra, {"c": 3}, response)
        if extra is signals.item_scraped:
            _send(crawler, signals.item_scraped, {"d": 4}, response)
        assert released.on_their_way() == {"row0", "row1"}
        assert released.deleted == []


def test_another_responses_items_say_nothing_of_a_release() -> None:
    crawler, released, _, _ = _released(earlier=1, own=0)
    _send(crawler, signals.item_scraped, {"quote": "x"}, TextResponse("data:,", body=b""))
    _send(crawler, signals.item_scraped, {"quote": "y"}, None)
    assert released.on_their_way() == {"row0"}


def test_a_copy_is_known_by_the_labels_it_carries_when_a_release_does_not_add_up() -> None:
    # A spider middleware after ours added a record (a signal too many), a later
    # pipeline handed on copies changing a field: the labelled copy names its row,
    # the unlabelled one nothing; a failure naming an object never yielded, nothing.
    for unknown in (False, True):
        crawler = get_crawler()
        released = Recorded(crawler)
        items = [{"text": "gone p", "change": "gone"}, {"text": "gone q", "change": "gone"}]
        rows = [held_item_key(page, "gone", "print") for page in ("https://a/p", "https://a/q")]
        released.expect({id(item): row for item, row in zip(items, rows, strict=True)})
        response = TextResponse("data:,", body=b"")
        released.handed(response, items)
        labels = {"change": "gone", "normalized_url": "https://a/p", "run_id": "r"}
        _send(crawler, signals.item_scraped, {"text": "cleaned p", **labels}, response)
        _send(crawler, signals.item_scraped, {"quote": "cleaned q"}, response)
        _send(crawler, signals.item_error if unknown else signals.item_scraped, {}, response)
        assert released.deleted == []  # at the close
        left = released.on_their_way()
        assert (left, released.deleted) == ((set(rows), []) if unknown else ({rows[1]}, rows[:1]))
