"""Geonode tokens over time: what the runs of a state spent this week and this plan
month (``INCRECRAWL_TOKENS_RESET_DAY`` starts it), the month's projection, and a
run's share of ``INCRECRAWL_MONTHLY_TOKENS``.

Every figure comes from the ``runs`` table (each run's ``tokens_charged``), over
all the state's seeds: a plan belongs to an API key, not to a seed. The state reads
those rows (``state/spending.py``); this module only computes from them. A run's share
is what is left of the month divided by the runs still to come before the reset,
counted from how often runs come (the median interval between the latest
starts); the last run before the reset may spend all that is left.
"""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

DAY = 86_400.0
WEEK = 7 * DAY
#: How many of the latest runs' starts say how often runs come.
INTERVAL_RUNS = 9
#: The interval assumed before two runs were seen: runs once a day.
DEFAULT_INTERVAL = DAY


def period(at: float, reset_day: int) -> tuple[float, float]:
    """The plan month holding *at*: from the latest *reset_day* (00:00 UTC) to the next."""
    now = datetime.fromtimestamp(at, timezone.utc)
    start = now.replace(day=reset_day, hour=0, minute=0, second=0, microsecond=0)
    if start > now:
        start = _shift(start, -1)
    return start.timestamp(), _shift(start, 1).timestamp()


def _shift(day: datetime, months: int) -> datetime:
    index = day.year * 12 + day.month - 1 + months  # reset days stop at 28: always valid
    return day.replace(year=index // 12, month=index % 12 + 1)


def run_interval(starts: list[float]) -> float:
    """How often runs come: the median gap between the latest *starts*."""
    ordered = sorted(starts)
    gaps = [later - earlier for earlier, later in itertools.pairwise(ordered)]
    gaps = [gap for gap in gaps if gap > 0]
    return statistics.median(gaps) if gaps else DEFAULT_INTERVAL


@dataclass(frozen=True)
class MonthShare:
    """A run's part of the plan month."""

    budget: int
    spent: int  # by the month's earlier runs
    interval: float  # seconds between runs, learned
    end: float  # the next reset
    share: int  # tokens this run may spend

    @property
    def left(self) -> int:
        return max(0, self.budget - self.spent)


def month_share(
    budget: int, spent: int, at: float, end: float, interval: float, start: float | None = None
) -> MonthShare:
    """What is left, spread over the runs still to come before *end*; at least what
    keeps the month on its straight line from *start* to *end* by the next run (a
    share under one token a run would otherwise round to nothing until the month's
    last days, and a run that found little to do is caught up)."""
    left = max(0, budget - spent)
    runs_left = max(1.0, (end - at) / interval)
    share = math.floor(left / runs_left)
    if start is not None and end > start:
        line = budget * min(1.0, (at - start + interval) / (end - start))
        share = max(share, min(left, math.floor(line) - spent))
    return MonthShare(budget=budget, spent=spent, interval=interval, end=end, share=share)


@dataclass(frozen=True)
class TokenFigures:
    """The tokens of a state's runs, as the summary, ``status`` and the report say them."""

    week: int  # runs started in the last 7 days
    month: int  # runs started since the reset
    month_start: float
    month_end: float
    #: The month's spending so far plus the pace of the latest runs to its end (the
    #: week's, or the month's when the week has one run); None from a single run.
    projected: int | None
    budget: int  # INCRECRAWL_MONTHLY_TOKENS; 0: none

    def as_dict(self) -> dict[str, Any]:
        return {
            "week": self.week,
            "month": self.month,
            "month_start": self.month_start,
            "month_end": self.month_end,
            "projected": self.projected,
            "budget": self.budget or None,
        }

    def line(self) -> str:
        start = _day(self.month_start)
        plan = (
            f"; plan {self.budget:,}: {max(0, self.budget - self.month):,} left"
            if self.budget
            else ""
        )
        projection = (
            "too early for a projection: one run so far"
            if self.projected is None
            else f"projected {self.projected:,} by {_day(self.month_end)}"
        )
        return (
            f"tokens: {self.week:,} in the last 7 days, {self.month:,} since {start} "
            f"({projection}{plan})"
        )


def figures(runs: list[tuple[float, int]], at: float, reset_day: int, budget: int) -> TokenFigures:
    """From ``(started_at, tokens_charged)`` rows of the runs started since
    ``since(at, reset_day)``."""
    start, end = period(at, reset_day)
    week = [(started, tokens) for started, tokens in runs if started >= at - WEEK]
    month = sum(tokens for started, tokens in runs if started >= start)
    spent_week = sum(tokens for _, tokens in week)
    # The pace of the week's runs, over the days since the first (a day at least); of
    # the runs read when the week has one (runs a week apart); none from a single run.
    paced = week if len(week) > 1 else runs
    projected = None
    if len(paced) > 1:
        seen = max(DAY, at - min(started for started, _ in paced))
        spent = sum(tokens for _, tokens in paced)
        projected = month + round(spent / seen * max(0.0, end - at))
    return TokenFigures(spent_week, month, start, end, projected, budget)


def since(at: float, reset_day: int) -> float:
    """The earliest run start the figures read."""
    return min(period(at, reset_day)[0], at - WEEK)


def _day(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%d")


def run_share(
    spent: int, starts: list[float], at: float, reset_day: int, budget: int
) -> MonthShare:
    """A run's share of *budget*, the month's runs having *spent* so far and the
    latest runs (this one's included) started at *starts*."""
    start, end = period(at, reset_day)
    return month_share(budget, spent, at, end, run_interval(starts), start)
