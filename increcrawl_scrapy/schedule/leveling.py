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
A spread check is placed at the middle of its day, or as near it as its window
allows, and never within EDGE of a day's edge: the runs to come do not start at this
run's hour to the second (a cron job a little earlier each day, runs that take
longer), and checks left at the hour their interval ended were counted on one day
and fetched on the next (a day of 3 checks, then one of 8, where the plan said 5 and
6: the 60-page daily test failed 3 runs of 6).
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
#: A spread check keeps this share of a day clear of either edge of its day.
EDGE = 0.25


class Leveler:
    """The checks planned per coming day (day k: the run *k* days after *start*,
    which fetches what came due in the day before it), and the placing of more."""

    def __init__(self, start: float, planned: dict[int, int]) -> None:
        self.start = start
        self.planned = planned

    def day_of(self, when: float) -> int:
        return math.ceil((when - self.start) / DAY)

    def place(self, now: float, interval: float, spread: bool = True) -> float:
        """When the check *interval* after *now* is best made: in the least loaded
        day (the latest among equals) from SPREAD of the interval earlier up to the
        wanted time, as near its middle as that window allows, never later than
        wanted. The window's days are those whose middle half it reaches: a check
        is due for its day's run whatever that run's hour, a quarter day either
        way (the day's end would fall just after a run that starts a little early,
        its start just before one that starts late). A check not to be *spread*
        stays as wanted, and is counted in the plan all the same."""
        wanted = now + interval
        early = now + (1 - SPREAD) * interval
        first = math.ceil((early - self.start) / DAY + EDGE)
        last = math.floor((wanted - self.start) / DAY + 1 - EDGE)
        if not spread or interval < DAY or last > HORIZON or last < first:
            # Hourly pages, far-off checks: nothing to even out.
            target = self.day_of(wanted)
            if target <= HORIZON:
                self.planned[target] = self.planned.get(target, 0) + 1
            return wanted
        best = min(range(first, last + 1), key=lambda d: (self.planned.get(d, 0), -d))
        self.planned[best] = self.planned.get(best, 0) + 1
        middle = self.start + (best - 0.5) * DAY
        return min(wanted, max(early, middle))


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
