"""Spreading next checks over the coming days, so that daily runs do similar work.

Pages first seen together would stay in lockstep: the same intervals from the same
start bring a whole site due on the same days (#52). A random jitter spreads them,
but only as evenly as chance does (on a site of 60 pages, a day of 1.7 times the
median in most months). So each next check may be brought forward, by up to SPREAD
of its interval, to the coming day with the fewest checks already planned (the
latest among equals): the state's plan for the next HORIZON days is read once per
run, then kept as checks are placed. A check is only ever moved earlier, never past
the policy's own: spreading costs requests, never freshness (a window reaching
later drifted late, the later days always looking emptier: p90 delay 78 h to 142 h).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

DAY = 86_400.0
#: A next check may come this share of its interval earlier, no later.
SPREAD = 0.75
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

    def place(self, now: float, interval: float, spread: bool = True) -> float:
        """When the check *interval* after *now* is best made: the least loaded day
        from SPREAD of the interval earlier up to the wanted one (the latest among
        equals), never later than wanted. A check not to be *spread* stays as
        wanted, and is counted in the plan all the same."""
        wanted = now + interval
        early = now + (1 - SPREAD) * interval
        first, target = self.day_of(early), self.day_of(wanted)
        if not spread or interval < DAY or target > HORIZON or target <= first:
            # Hourly pages, far-off checks: nothing to even out.
            if target <= HORIZON:
                self.planned[target] = self.planned.get(target, 0) + 1
            return wanted
        best = min(range(first, target + 1), key=lambda d: (self.planned.get(d, 0), -d))
        self.planned[best] = self.planned.get(best, 0) + 1
        if best == target:
            return wanted
        # The middle of the chosen day: due for that day's run whatever its hour
        # (the day's end would fall just after a run that starts a little early).
        return min(wanted, max(early, self.start + (best - 0.5) * DAY))


class Leveling:
    """A Leveler for the current run, made from the state's plan: read at the first
    check placed (SQLite), or beforehand on the worker thread that reads the rows
    (``prepare``, a shared state: the reactor's thread never reads)."""

    def __init__(
        self,
        read_plan: Callable[[Any, float, float], dict[int, int]],
        clock: Callable[[], float],
        read_in_place: Any = None,
    ) -> None:
        self.read_plan = read_plan  # (connection, start, end) -> checks per day
        self.clock = clock
        #: The connection to read the plan on when placing (None: a shared state,
        #: whose plan ``prepare`` reads; unread, checks stay as wanted).
        self.read_in_place = read_in_place
        self.leveler: Leveler | None = None
        self._lock = threading.Lock()

    def new_run(self) -> None:
        """The plan is read again: other runs and workers placed checks since."""
        self.leveler = None

    def prepare(self, connection: Any) -> None:
        """Read the plan on *connection* (the caller's thread) if not read yet."""
        if self.leveler is None:
            now = self.clock()
            plan = self.read_plan(connection, now, now + HORIZON * DAY)
            with self._lock:
                if self.leveler is None:
                    self.leveler = Leveler(now, plan)

    def place(self, now: float, interval: float, spread: bool) -> float:
        if self.leveler is None and self.read_in_place is not None:
            self.prepare(self.read_in_place)
        if self.leveler is None:
            return now + interval
        return self.leveler.place(now, interval, spread)
