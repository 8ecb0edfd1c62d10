"""The plan month and a run's share of it (``token_plan.py``): the reset day across
months and years, how often runs come, the last run before a reset."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from scrapy.settings import Settings

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.schedule.token_plan import DAY, figures, month_share, period, run_interval


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=timezone.utc).timestamp()  # type: ignore[misc]


@pytest.mark.parametrize(
    ("now", "reset_day", "start", "end"),
    [
        (at(2026, 12, 2, 3), 1, at(2026, 12, 1), at(2027, 1, 1)),
        (at(2026, 12, 2, 3), 12, at(2026, 11, 12), at(2026, 12, 12)),
        (at(2026, 12, 12), 12, at(2026, 12, 12), at(2027, 1, 12)),  # the reset itself
        (at(2027, 1, 5), 28, at(2026, 12, 28), at(2027, 1, 28)),
        (at(2027, 2, 28, 23), 28, at(2027, 2, 28), at(2027, 3, 28)),
    ],
)
def test_the_plan_month_runs_from_reset_day_to_reset_day(
    now: float, reset_day: int, start: float, end: float
) -> None:
    assert period(now, reset_day) == (start, end)


def test_how_often_runs_come_is_the_median_gap() -> None:
    assert run_interval([]) == run_interval([5.0]) == DAY  # not known yet: daily
    assert run_interval([0, DAY, 3 * DAY, 3.5 * DAY, 4.5 * DAY]) == DAY
    assert run_interval([10.0, 10.0, 20.0]) == 10.0  # a run started twice at once: no gap


def test_a_share_is_what_is_left_over_the_runs_to_come() -> None:
    end = at(2027, 1, 1)
    share = month_share(600, 100, end - 10 * DAY, end, DAY)  # ten daily runs left
    assert (share.left, share.share) == (500, 50)
    assert month_share(600, 100, end - 0.5 * DAY, end, DAY).share == 500  # the last one
    assert month_share(600, 700, end - 10 * DAY, end, DAY).share == 0  # over (a setting cut)
    # A share under a token a run still spends along the month's line, never past it.
    start = end - 30 * DAY
    assert month_share(30, 0, start, end, 0.1 * DAY).share == 0  # without the line
    assert month_share(30, 0, start + 3 * DAY, end, 0.1 * DAY, start).share == 3
    assert month_share(30, 29, end - 0.2 * DAY, end, DAY, start).share == 1  # what is left


@pytest.mark.parametrize("value", [0, 29, "x"])
def test_a_reset_day_outside_1_to_28_is_refused(value: object) -> None:
    with pytest.raises(ConfigError, match="INCRECRAWL_TOKENS_RESET_DAY"):
        IncrecrawlConfig.from_settings(Settings({"INCRECRAWL_TOKENS_RESET_DAY": value}))


def test_one_run_is_too_early_for_a_projection() -> None:
    # One run's tokens say nothing of how often runs come: no month is drawn from it.
    now = at(2026, 12, 3, 12)
    one = figures([(now - 60, 24)], now, 1, 0)
    assert one.projected is None
    assert one.line() == (
        "tokens: 24 in the last 7 days, 24 since 2026-12-01 "
        "(too early for a projection: one run so far)"
    )
    assert "plan 500: 476 left)" in figures([(now - 60, 24)], now, 1, 500).line()
    # Two runs a day apart: the pace of those two.
    two = figures([(now - DAY - 60, 24), (now - 60, 24)], now, 1, 0)
    assert two.projected == 48 + round(48 / (DAY + 60) * (at(2027, 1, 1) - now))


def test_runs_a_week_apart_are_projected_from_the_month_not_from_the_last_one() -> None:
    # Weekly runs: one in the last 7 days, the month's others before it.
    now = at(2026, 12, 15, 12)
    runs = [(at(2026, 12, 1, 11), 100), (at(2026, 12, 8, 11), 100), (at(2026, 12, 15, 11), 100)]
    weekly = figures(runs, now, 1, 0)
    assert weekly.week == 100 and weekly.month == 300
    seen = now - at(2026, 12, 1, 11)
    assert weekly.projected == 300 + round(300 / seen * (at(2027, 1, 1) - now))
