"""Items a bounded run kept whole for the next run (``pages/pending.py``): the state
says which class to make them of, so it is read as data, never as code to run."""

from __future__ import annotations

import scrapy

from increcrawl_scrapy.pages.pending import kept, rebuilt


class Quote(scrapy.Item):
    text = scrapy.Field()
    author = scrapy.Field()


def test_an_item_kept_whole_comes_back_of_its_class() -> None:
    again = rebuilt(kept(Quote(text="x" * 500, author="A")))
    assert isinstance(again, Quote) and again["text"] == "x" * 500


def test_a_state_naming_a_callable_that_is_no_item_class_gets_its_fields_only(
    tmp_path,
) -> None:
    # A shared state another machine writes: a row naming os.system (or any callable
    # that takes the fields as keywords) must not be called.
    marker = tmp_path / "ran"
    crafted = ["os.system", {"command": f"touch {marker}"}]
    assert rebuilt(crafted) == {"command": f"touch {marker}"}
    assert not marker.exists()
    # A module not imported by the crawl is not imported for it.
    assert rebuilt(["antigravity.Thing", {"a": 1}]) == {"a": 1}
