"""A wall clock shifted by ``INCRECRAWL_TIME_SHIFT`` seconds, for demos and
subprocess tests: ``-s INCRECRAWL_CLOCK=increcrawl_scrapy.testing.clock.shifted_time``."""

from __future__ import annotations

import os
import time

SHIFT_VARIABLE = "INCRECRAWL_TIME_SHIFT"


def shifted_time() -> float:
    return time.time() + float(os.environ.get(SHIFT_VARIABLE) or 0)
