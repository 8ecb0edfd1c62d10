"""A line every ``INCRECRAWL_PROGRESS_INTERVAL`` seconds while a crawl runs (like
Scrapy's LogStats): the phase, pages done out of due, the rate, the time left."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from twisted.internet import task

from increcrawl_scrapy import stats

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

DISCOVERY, FETCHING, BATCH = "discovery", "fetching", "batch polling"


class Progress:
    def __init__(self, crawler: Crawler, interval: float) -> None:
        self.crawler = crawler
        self.interval = interval  # 0: no lines
        self.phase = DISCOVERY
        self._fetching_since: float | None = None
        self._loop: task.LoopingCall | None = None

    def start(self) -> None:
        if self.interval > 0 and self._loop is None:
            self._loop = task.LoopingCall(self.log)
            self._loop.start(self.interval, now=False)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def enter(self, phase: str) -> None:
        self.phase = phase
        if phase != DISCOVERY and self._fetching_since is None:
            self._fetching_since = time.monotonic()

    def log(self) -> None:
        value = self.crawler.stats.get_value if self.crawler.stats else None
        if value is None:
            return
        if self.phase == DISCOVERY:
            logger.info(
                "Progress: discovery, %d URLs read from %d sitemaps",
                value(stats.DISCOVERED, 0),
                value(stats.SITEMAPS, 0),
            )
            return
        due = int(value(stats.DUE, 0))
        done = int(value(stats.ERRORS, 0)) + sum(
            int(value(key, 0)) for key in stats.BY_CHANGE.values()
        )
        elapsed = time.monotonic() - (self._fetching_since or time.monotonic())
        rate = done / elapsed if elapsed > 0 else 0.0
        left = f"about {(due - done) / rate:.0f} s left" if rate and due > done else "-"
        logger.info(
            "Progress: %s, %d of %d due pages done (%.1f pages/s), %s",
            self.phase,
            done,
            due,
            rate,
            left,
        )
