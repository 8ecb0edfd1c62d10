from __future__ import annotations

import time

import pytest

from tests.crawling import KEY


class Clock:
    """A clock the test moves by hand (Unix seconds)."""

    def __init__(self, now: float | None = None) -> None:
        # Real time to start with: the sample site dates its edits with the real
        # clock, and a sitemap date after the crawl's clock is one in the future.
        self.now = float(int(time.time())) if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def site():
    from increcrawl_scrapy.testing import SampleSite

    with SampleSite(pages=12) as running:
        yield running


@pytest.fixture
def api():
    from increcrawl_scrapy.testing import GeonodeStandIn

    with GeonodeStandIn(api_keys=["test-key", KEY]) as running:
        yield running
