"""Spreading next checks over the coming days, so that daily runs do similar work.

Pages first seen together would stay in lockstep: the same intervals from the same
start bring a whole site due on the same days (#52). A random jitter spreads them,
but only as evenly as chance does (on a site of 60 pages, a day of 1.7 times the
median in most months). So each next check is placed, from SPREAD of its interval
earlier to LATER of it later, on the coming day with the fewest checks already
planned (the nearest to the wanted one among equals): the state's plan for the next
HORIZON days is read once per process, then kept as checks are placed. The emptiest
days are mostly the latest: the window leans early, so checks do not drift late.
"""

from __future__ import annotations

import math
from collections.abc import Callable

DAY = 86_400.0
#: A next check may come this share of its interval earlier, or LATER later: the
#: later days always look emptier (fewer of their checks are planned yet), so a wide
#: window on the late side drifts late (on a site whose pages all change monthly:
#: fewer requests, but pages stale for longer).
SPREAD = 0.5
LATER = 0.25
#: Days ahead whose planned checks are counted; checks further out are left alone.
HORIZON = 120


class Leveler:
    """The checks planned per coming day (day k: the run *k* days after *start*,
    which fetches what came due in the day before it), and the placing of more."""

    def __init__(self, start: float, planned: dict[int, int]) -> None:
        self.start = start
        self.planned = planned

    def day_of(self, when: float) -> int:
        return math.ceil((when - self.start) / DAY)

    def place(
        self, now: float, interval: float, bound: float | None = None, spread: bool = True
    ) -> float:
        """When the check *interval* after *now* is best made: the least loaded day
        in the window (the nearest to the wanted one among equals), never past
        *bound* after *now* (INCRECRAWL_MAX_STALENESS). A check not to be *spread*
        stays as wanted, and is counted in the plan all the same."""
        wanted = now + interval
        early = now + (1 - SPREAD) * interval
        late = now + (1 + LATER) * interval
        if bound is not None:
            late = min(late, now + bound)
            wanted = min(wanted, late)
        first, last, target = self.day_of(early), self.day_of(late), self.day_of(wanted)
        if not spread or interval < DAY or last > HORIZON or last <= first:
            # Hourly pages, far-off checks: nothing to even out.
            if target <= HORIZON:
                self.planned[target] = self.planned.get(target, 0) + 1
            return wanted
        best = min(range(first, last + 1), key=lambda d: (self.planned.get(d, 0), abs(d - target)))
        self.planned[best] = self.planned.get(best, 0) + 1
        if best == target:
            return wanted
        day_start, day_end = self.start + (best - 1) * DAY, self.start + best * DAY
        return min(max(wanted, day_start + 1.0, early), day_end, late)


class Leveling:
    """A Leveler made at the first check placed, from the state's plan then."""

    def __init__(
        self, read_plan: Callable[[float, float], dict[int, int]], bound: float | None
    ) -> None:
        self.read_plan = read_plan
        self.bound = bound  # INCRECRAWL_MAX_STALENESS
        self.leveler: Leveler | None = None

    def place(self, now: float, interval: float, spread: bool) -> float:
        if self.leveler is None:
            self.leveler = Leveler(now, self.read_plan(now, now + HORIZON * DAY))
        return self.leveler.place(now, interval, self.bound, spread)
