"""The project-shape matrix (``matrix.py``) on a real documentation site: a
``CrawlSpider`` over a MkDocs build behind nginx (items with a URL field), pages
edited, added, deleted and moved (a new slug) between runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from tests.embedding import matrix_spiders as spiders
from tests.embedding.matrix import (
    DAY,
    HOUR,
    LATER,
    DocsWorld,
    Shape,
    Step,
    docs_edited,
    docs_edited_again,
    run_shape,
)
from tests.embedding.test_matrix_sites import needs
from tests.support.nginx import nginx_binary

pytestmark = pytest.mark.e2e

SHAPES = [
    pytest.param(
        Shape(
            "crawlspider-docs",
            DocsWorld,
            spiders.DocsSpider,
            # A deleted page no link leads to is checked once 1 run has not fetched it.
            settings={"INCRECRAWL_UNREACHED_RUNS": 1},
            steps=(
                Step(0),
                Step(HOUR),
                Step(LATER, docs_edited, more=(6 * DAY,)),
                Step(HOUR),
                Step(LATER, docs_edited_again, more=(6 * DAY,)),
            ),
        ),
        marks=[
            *needs("mkdocs", "MkDocs"),
            pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
        ],
    ),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: getattr(shape, "name", None))
@pytest_twisted.ensureDeferred
async def test_the_change_set_is_the_truth_and_the_summary_the_feed(
    shape: Shape, tmp_path: Path
) -> None:
    await run_shape(shape, tmp_path)
