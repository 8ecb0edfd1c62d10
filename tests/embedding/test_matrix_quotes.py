"""The project-shape matrix (``matrix.py``) on the quotes app: Scrapy's tutorial
spider as users run it (plain, with the HTTP cache on, bounded, with two feeds),
logged in first, over the JSON API, over a grid paged by postbacks, and with a key
declared. Five runs each: the first, one an hour later (nothing due, nothing
delivered), edits a month later, nothing an hour later, more edits a month later."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from tests.embedding import matrix_spiders as spiders
from tests.embedding.matrix import (
    HOUR,
    LATER,
    QuotesWorld,
    Shape,
    Step,
    quotes_edited,
    quotes_edited_again,
    run_shape,
)

pytestmark = pytest.mark.e2e

STEPS = (
    Step(0),
    Step(HOUR),
    Step(LATER, quotes_edited),
    Step(HOUR),
    Step(LATER, quotes_edited_again),
)

SHAPES = [
    Shape("tutorial", QuotesWorld, spiders.TutorialSpider, steps=STEPS),
    Shape(
        "login",
        lambda: QuotesWorld(login_required=True),
        spiders.LoginSpider,
        steps=STEPS,
    ),
    Shape("json-api", QuotesWorld, spiders.ApiSpider, steps=STEPS),
    Shape("postbacks", QuotesWorld, spiders.GridSpider, steps=STEPS),
    Shape(
        "http-cache",
        QuotesWorld,
        spiders.TutorialSpider,
        settings={"HTTPCACHE_ENABLED": True, "HTTPCACHE_DIR": "set per run"},
        steps=STEPS,
    ),
    Shape(
        "two-feeds",
        QuotesWorld,
        spiders.TutorialSpider,
        settings={"FEED_EXPORT_FIELDS": None},
        feeds=2,
        steps=STEPS,
    ),
    Shape(
        "bounded",
        QuotesWorld,
        spiders.TutorialSpider,
        # Two pages a run: a month's edits take the run and the next ones, an hour apart.
        bound={"CLOSESPIDER_PAGECOUNT": 2},
        steps=(
            Step(0),
            Step(HOUR),
            Step(LATER, quotes_edited, more=(HOUR, HOUR)),
            Step(HOUR),
            Step(LATER, quotes_edited_again, more=(HOUR, HOUR)),
        ),
    ),
    Shape(
        "item-key",
        lambda: QuotesWorld(by="text"),
        spiders.TutorialSpider,
        settings={"INCRECRAWL_ITEM_KEY": ["text"]},
        steps=STEPS,
    ),
]


@pytest.mark.filterwarnings("ignore:.*from_response.*")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: getattr(shape, "name", None))
@pytest_twisted.ensureDeferred
async def test_the_change_set_is_the_truth_and_the_summary_the_feed(
    shape: Shape, tmp_path: Path
) -> None:
    await run_shape(shape, tmp_path)
