"""The growth check: how many times longer a piece of work takes on an input
``TIMES`` as large. A ratio of CPU times of the same work, so that no machine is too
slow for it and no other process's load moves it: the suite asserts no absolute
duration (a test that passed on a quiet machine failed CI on a slower one)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

TIMES = 4
#: Linear work takes about 4 times as long on 4 times the input, quadratic work 16
#: times: the limit lies halfway (as ratios) between them.
MOST = 8.0


def cpu(work: Callable[[], object], repeats: int = 3) -> float:
    """The least thread CPU time of *repeats* runs of *work*."""
    best = math.inf
    for _ in range(repeats):
        started = time.thread_time()
        work()
        best = min(best, time.thread_time() - started)
    return best


def growth(work: Callable[[str], object], text_of: Callable[[int], str], size: int) -> float:
    """How many times longer *work* takes on ``text_of(TIMES * size)`` than on
    ``text_of(size)``."""
    small, large = text_of(size), text_of(TIMES * size)
    return cpu(lambda: work(large)) / cpu(lambda: work(small))
