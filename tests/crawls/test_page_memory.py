"""The matching rule of a page's items across versions, and kept requests."""

from __future__ import annotations

import scrapy

from increcrawl_scrapy.pages.kept_requests import kept_request, request_data, request_of
from increcrawl_scrapy.pages.memory import Memory, item_print, match, match_versions, unpack


def quote(text: str, author: str = "Jane Austen", tags: tuple[str, ...] = ("life",)) -> dict:
    return {"text": text, "author": author, "tags": list(tags)}


def prints(*items: dict) -> list:
    return [item_print(item) for item in items]


def test_identical_items_are_unchanged_wherever_they_moved() -> None:
    before = prints(quote("a"), quote("b"), quote("c"))
    found = match(before, prints(quote("c"), quote("a"), quote("b")))
    assert [label for label, _ in found.labels] == ["unchanged"] * 3 and found.gone == []


def test_an_edited_item_is_changed_with_its_fields() -> None:
    before = prints(quote("a"), quote("b", author="Mark Twain"), quote("c"))
    now = prints(quote("a"), quote("B!", author="Mark Twain"), quote("c"))
    found = match(before, now)
    assert found.labels == [("unchanged", []), ("changed", ["text"]), ("unchanged", [])]


def test_less_than_half_the_fields_equal_is_new_and_gone() -> None:
    before = prints(quote("a"), quote("b", author="Mark Twain", tags=("humor",)))
    now = prints(quote("a"), quote("z", author="Steve Martin", tags=("humor",)))
    found = match(before, now)
    assert [label for label, _ in found.labels] == ["unchanged", "new"]
    (gone,) = found.gone
    assert gone.values == {"text": "b", "author": "Mark Twain", "tags": ["humor"]}


def test_a_field_made_of_another_is_no_second_evidence() -> None:
    # The portrait URL is made of the author (one to one where authors repeat): an
    # item by the same author is one coincidence, not two equal fields of four.
    def portrait(text: str, author: str, tags: tuple[str, ...]) -> dict:
        return {**quote(text, author, tags), "image_urls": [f"/img/{author}.png"]}

    before = prints(
        portrait("a", "Mark Twain", ("humor",)),
        portrait("b", "Mark Twain", ("life",)),
        portrait("c", "Jane Austen", ("books",)),
    )
    now = prints(
        portrait("b", "Mark Twain", ("life",)),
        portrait("c", "Jane Austen", ("books",)),
        portrait("z", "Mark Twain", ("love",)),
    )
    found = match(before, now)
    assert [label for label, _ in found.labels] == ["unchanged", "unchanged", "new"]
    assert [gone.values["text"] for gone in found.gone] == ["a"]
    # Text and author are no such pair (texts do not repeat): an edit is `changed`.
    edited = prints(
        portrait("B!", "Mark Twain", ("life",)), portrait("c", "Jane Austen", ("books",))
    )
    found = match(before[1:], edited)
    assert found.labels[0] == ("changed", ["text"])


def test_ties_go_to_the_nearest_position() -> None:
    # Two quotes by the same author edited: each pairs with the one in its place.
    before = prints(quote("a"), quote("b"), quote("c"))
    now = prints(quote("a2"), quote("b"), quote("c2"))
    found = match(before, now)
    assert found.labels == [("changed", ["text"]), ("unchanged", []), ("changed", ["text"])]
    assert found.gone == []


def test_a_page_of_one_item_keeps_its_item_by_its_url() -> None:
    before, now = prints({"title": "a", "price": 1}), prints({"title": "b", "price": 2})
    found = match(before, now, own_url=True)
    assert found.labels == [("changed", ["price", "title"])] and found.gone == []


def test_one_item_and_one_item_is_no_evidence() -> None:
    # Items without their URL: one and one may be any two items (the last page of
    # a listing, whose item moved a page up and another took its place).
    before, now = prints({"title": "a", "price": 1}), prints({"title": "b", "price": 2})
    found = match(before, now)
    assert found.labels == [("new", [])] and [gone.values for gone in found.gone] == [
        {"title": "a", "price": 1}
    ]


def shoe(listing: str, price: str = "20.00") -> dict:
    return {"url": "https://shop.example/p/2", "name": "Shoe 2", "price": price, "in": listing}


def test_the_versions_of_a_run_are_kept_in_an_order_of_their_own() -> None:
    # An item two listings list, each their own way: the memory is the same in
    # whichever order the listings answered.
    shoes, sale = prints(shoe("shoes")), prints(shoe("sale"))
    one = Memory(shoes, None).with_version(sale)
    other = Memory(sale, None).with_version(shoes)
    assert one.pack() == other.pack() and one.views == [1, 1]
    kept = unpack(one.pack())
    assert kept is not None and kept.versions() == one.versions()
    # The page's own response (its requests kept, to be replayed) may come second.
    own = [{"url": "https://shop.example/p/3", "callback": "parse"}]
    assert Memory(shoes, None).with_version(sale, Memory(sale, own)).requests == own
    assert Memory(shoes, own).with_version(sale, None).requests == own
    # A listing's version (its items another response's) keeps nothing of it.
    listing = Memory(sale, None, own=False)
    assert Memory(shoes, None, own=False).with_version(sale, listing).own is False


def test_a_version_of_the_previous_run_is_the_item_as_before() -> None:
    previous = Memory(prints(shoe("shoes")), None).with_version(prints(shoe("sale")))
    for listing in ("shoes", "sale"):
        found, as_before = match_versions(previous, prints(shoe(listing)), own_url=True)
        assert as_before and found.labels == [("unchanged", [])] and found.gone == []
    # Edited: matched against the nearest version, its own listing's.
    found, as_before = match_versions(previous, prints(shoe("sale", "15.00")), own_url=True)
    assert not as_before and found.labels == [("changed", ["price"])] and found.gone == []


def test_added_and_removed_fields_are_changed_fields() -> None:
    before = prints({"sku": "1", "name": "x", "price": 1, "old": True})
    now = prints({"sku": "1", "name": "x", "price": 1, "new": True}, {"sku": "2"})
    found = match(before, now)
    assert found.labels == [("changed", ["new", "old"]), ("new", [])]


def test_long_values_are_hashed_not_kept() -> None:
    item = item_print({"id": "7", "body": "x" * 5000})
    assert item.values == {"id": "7"} and set(item.fields) == {"id", "body"}
    memory = unpack(Memory([item] * 1000, []).pack())
    assert memory is not None and len(memory.items) == 1000
    assert len(Memory([item] * 1000, []).pack()) < 20_000
    assert unpack(b"not zlib") is None  # unreadable: as if none was kept


class FollowingSpider(scrapy.Spider):
    name = "following"

    def parse_detail(self, response, page):
        pass


def test_requests_are_kept_with_their_callback_and_arguments() -> None:
    spider = FollowingSpider()
    request = scrapy.Request(
        "http://127.0.0.1/next",
        callback=spider.parse_detail,
        cb_kwargs={"page": 2},
        meta={"rule": 0},
        headers={"X-Mine": "1"},
        method="POST",
        body=b"q=\xff",
        priority=3,
    )
    data = request_data(request, spider)
    assert data is not None
    again = request_of(unpack(Memory([], [data]).pack()).requests[0], spider)  # type: ignore[union-attr]
    assert again.url == request.url and again.callback == spider.parse_detail
    assert again.cb_kwargs == {"page": 2} and again.meta == {"rule": 0}
    assert again.headers["X-Mine"] == b"1" and again.body == b"q=\xff"
    assert again.method == "POST" and again.priority == 3


def test_a_request_that_cannot_be_kept_is_said() -> None:
    spider = FollowingSpider()
    assert (
        request_data(scrapy.Request("http://127.0.0.1/", callback=lambda r: None), spider) is None
    )
    assert request_data(scrapy.Request("http://127.0.0.1/", meta={"o": object()}), spider) is None


def test_a_memory_kept_before_it_said_whose_items_it_holds() -> None:
    """Kept before ``own`` was: taken for the page's own (its requests were None too
    when they could not be kept, test_gone_pages_spelled.py)."""
    import json
    import zlib

    def old(requests: list | None) -> bytes:
        return zlib.compress(json.dumps({"items": [], "requests": requests}).encode())

    assert unpack(old([])).own is True  # type: ignore[union-attr]
    assert unpack(old(None)).own is True  # type: ignore[union-attr]
    # Now a page's own items whose requests could not be kept say so apart.
    assert unpack(Memory([], None, own=True).pack()).own is True  # type: ignore[union-attr]


def test_a_field_named_volatile_since_is_left_out_of_the_kept_prints() -> None:
    kept = Memory(prints({"text": "a", "at": "1"}, {"text": "b", "at": "1", "body": "x" * 400}))
    now = [item_print(item, ("at",)) for item in ({"text": "a"}, {"text": "b", "body": "x" * 400})]
    found = match(kept.without(("at",)).items, now)
    assert found.labels == [("unchanged", []), ("unchanged", [])] and found.gone == []
    assert kept.without(()) is kept


def test_a_kept_request_is_as_it_was_yielded() -> None:
    """Kept as the spider yielded it: the downloader's middlewares set meta on the
    same request afterwards (a timeout, the Geonode API's whole answer), and on
    Scrapy 2.13 that happened before the page's memory was written, so a listing
    seemed to pass data on and was never recorded."""
    spider = FollowingSpider()
    request = scrapy.Request("http://127.0.0.1/a", meta={"rule": 0}, headers={"X-Mine": "1"})
    data = request_data(request, spider)
    request.meta["download_timeout"] = 180.0
    request.meta["geonode_api_response"] = {"data": {"html": "<p>a</p>"}}
    request.headers["X-Later"] = "1"
    assert data is not None and data["meta"] == {"rule": 0}
    assert list(data["headers"]) == ["X-Mine"]


def test_the_kept_request_of_a_page_holds_no_geonode_answer() -> None:
    """The request that reached a page through the Geonode API carries the API's whole
    answer in its meta (the page's HTML): not the crawl's way of asking, not kept."""
    spider = FollowingSpider()
    request = scrapy.Request("http://127.0.0.1/a", meta={"rule": 0})
    request.meta["geonode_api_response"] = {"data": {"html": "<p>a</p>" * 1000}}
    kept = kept_request(request, spider)
    assert kept is not None and kept["meta"] == {"rule": 0}


def test_how_to_fetch_is_no_data_passed_on() -> None:
    """scrapy-playwright's and scrapy-zyte-api's meta say how to fetch a page: a page
    whose requests carry them may still be a listing, and they make no digest."""
    from increcrawl_scrapy.pages.passed_data import passed_on, passes_data

    request = scrapy.Request(
        "http://127.0.0.1/a",
        meta={"playwright": True, "playwright_context": "c", "zyte_api_automap": True},
    )
    assert passed_on(request) is None
    assert not passes_data({"meta": dict(request.meta), "cb_kwargs": {}})
    request.meta["category"] = "shoes"
    assert passed_on(request) is not None


def test_data_passed_on_is_digested_by_its_structure() -> None:
    """A Decimal, a date or a UUID is the same data each run (it made a new digest
    every time: every product page fetched whole); a cycle, an object with no
    structure are never the same (a RecursionError dropped the request); Scrapy's
    HTTP auth meta is no data."""
    import datetime
    import decimal
    import uuid

    from increcrawl_scrapy.pages.passed_data import passed_on, passes_data

    def digest(**cb_kwargs: object) -> str | None:
        return passed_on(scrapy.Request("http://127.0.0.1/a", cb_kwargs=cb_kwargs))

    stable = {
        "price": decimal.Decimal("10.50"),
        "day": datetime.date(2026, 12, 7),
        "at": datetime.datetime(2026, 12, 7, 10, 0, tzinfo=datetime.timezone.utc),
        "id": uuid.UUID(int=7),
    }
    assert digest(**stable) == digest(**stable) is not None
    assert digest(price=decimal.Decimal("10.50")) != digest(price=decimal.Decimal("12"))
    node: dict[str, object] = {"name": "a"}
    node["parent"] = {"children": [node]}
    assert digest(node=node) != digest(node=node)
    assert digest(row=object()) != digest(row=object())
    auth = {"http_user": "u", "http_pass": "p", "http_auth_domain": "127.0.0.1"}
    assert not passes_data({"meta": auth, "cb_kwargs": {}})
