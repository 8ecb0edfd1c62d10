"""Spreading next checks over the coming days (#52, 2), as pure functions: each
spread check is due in the run the plan counted it for, whatever that run's hour."""

from __future__ import annotations

from increcrawl_scrapy.schedule.leveling import EDGE, SPREAD, Leveler

DAY = 86_400.0
START = 1_700_000_000.0


def test_a_spread_check_keeps_clear_of_its_days_edges() -> None:
    # Intervals ending at every hour of the coming month, on a plan already even: a
    # check left at the hour its interval ended (late in a day, say) was counted on
    # that day and fetched the next by a run starting a little early, or the day
    # before by one starting late.
    for hours in range(24, 30 * 24):
        interval = hours * 3_600.0 + 1_234.0
        planned = {day: 5 for day in range(1, 40)}
        leveler = Leveler(START, dict(planned))
        when = leveler.place(START, interval)
        (day,) = [d for d, n in leveler.planned.items() if n != planned.get(d)]
        offset = (when - START) / DAY
        assert day - 1 + EDGE <= offset <= day - EDGE, (hours, day, offset)
        # Brought forward at most SPREAD of the interval, never later than wanted.
        assert START + (1 - SPREAD) * interval <= when <= START + interval


def test_the_least_loaded_day_takes_the_check() -> None:
    leveler = Leveler(START, {day: 5 for day in range(1, 20)} | {9: 1, 10: 1})
    when = leveler.place(START, 10.6 * DAY)
    # The latest among the least loaded, at the middle of its day.
    assert leveler.day_of(when) == 10 and leveler.planned[10] == 2
    assert when == START + 9.5 * DAY


def test_a_check_not_spread_stays_as_wanted_and_is_counted() -> None:
    leveler = Leveler(START, {})
    assert leveler.place(START, 10.9 * DAY, spread=False) == START + 10.9 * DAY
    assert leveler.planned == {11: 1}
