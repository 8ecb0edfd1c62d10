"""The project-shape matrix (``matrix.py``) on other stacks: scrapy-playwright
rendering the quotes app's JavaScript pages in the system's
Chromium, and Scrapy's ``ImagesPipeline`` fetching each quote's portrait."""

from __future__ import annotations

import shutil
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

QUOTE_STEPS = (
    Step(0),
    Step(HOUR),
    Step(LATER, quotes_edited),
    Step(HOUR),
    Step(LATER, quotes_edited_again),
)
CHROMIUM = "/usr/bin/chromium"


def needs(module: str, what: str) -> list[pytest.MarkDecorator]:
    try:
        __import__(module)
    except ImportError:
        return [pytest.mark.skip(reason=f"{what} is not installed (the test extra has it)")]
    return []


SHAPES = [
    pytest.param(
        Shape(
            "playwright",
            QuotesWorld,
            spiders.BrowserSpider,
            settings={
                "DOWNLOAD_HANDLERS": {
                    "http": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
                    "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler",
                },
                "PLAYWRIGHT_LAUNCH_OPTIONS": {
                    "executable_path": CHROMIUM,
                    "headless": True,
                    "args": ["--no-sandbox"],
                },
            },
            steps=QUOTE_STEPS,
        ),
        marks=[
            *needs("scrapy_playwright", "scrapy-playwright"),
            pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="no system Chromium"),
        ],
    ),
    pytest.param(
        Shape(
            "images-pipeline",
            QuotesWorld,
            spiders.PortraitSpider,
            settings={
                "ITEM_PIPELINES": {"scrapy.pipelines.images.ImagesPipeline": 1},
                "IMAGES_STORE": "set per run",
            },
            steps=QUOTE_STEPS,
        ),
        marks=[
            *needs("PIL", "Pillow"),
        ],
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: getattr(shape, "name", None))
@pytest_twisted.ensureDeferred
async def test_the_change_set_is_the_truth_and_the_summary_the_feed(
    shape: Shape, tmp_path: Path
) -> None:
    await run_shape(shape, tmp_path)
