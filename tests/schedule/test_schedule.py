from __future__ import annotations

import pytest

from increcrawl_scrapy.config import IncrecrawlConfig
from increcrawl_scrapy.schedule.policy import Outcome, RevisitPolicy, classify

HOUR, DAY = 3600.0, 86400.0


def test_classify() -> None:
    assert classify(200, previous_hash=None, new_hash="a", fetched_before=False) is Outcome.NEW
    assert classify(200, previous_hash="a", new_hash="a", fetched_before=True) is Outcome.UNCHANGED
    assert classify(200, previous_hash="a", new_hash="b", fetched_before=True) is Outcome.CHANGED
    assert (
        classify(304, previous_hash="a", new_hash=None, fetched_before=True) is Outcome.NOT_MODIFIED
    )
    for status in (404, 410):
        assert (
            classify(status, previous_hash="a", new_hash=None, fetched_before=True) is Outcome.GONE
        )
    for status in (0, 403, 429, 500, 503):
        assert (
            classify(status, previous_hash="a", new_hash=None, fetched_before=True) is Outcome.ERROR
        )
    # A 200 without content (an API answer that carried none) proves nothing.
    assert classify(200, previous_hash="a", new_hash=None, fetched_before=True) is Outcome.ERROR


def test_change_label() -> None:
    assert Outcome.NOT_MODIFIED.change == "unchanged"
    assert Outcome.GONE.change == "gone"


def test_interval_halves_down_to_the_floor() -> None:
    policy = RevisitPolicy()
    interval, seen = DAY, []
    for _ in range(10):
        interval = policy.next_interval(interval, Outcome.CHANGED)
        seen.append(interval)
    assert seen[:5] == [DAY / 2, DAY / 4, DAY / 8, DAY / 16, HOUR]
    assert all(value == HOUR for value in seen[4:])


def test_interval_grows_up_to_the_ceiling() -> None:
    policy = RevisitPolicy()
    interval = DAY
    for _ in range(30):
        interval = policy.next_interval(interval, Outcome.UNCHANGED)
        assert HOUR <= interval <= 30 * DAY
    assert interval == 30 * DAY
    assert policy.next_interval(DAY, Outcome.NOT_MODIFIED) == 1.5 * DAY


def test_new_gone_and_error_do_not_move_the_interval() -> None:
    policy = RevisitPolicy()
    assert policy.next_interval(None, Outcome.NEW) == DAY
    assert policy.next_interval(5 * DAY, Outcome.GONE) == 5 * DAY
    assert policy.next_interval(5 * DAY, Outcome.ERROR) == 5 * DAY


def test_out_of_bounds_current_interval_is_brought_back() -> None:
    policy = RevisitPolicy()
    assert policy.next_interval(90 * DAY, Outcome.UNCHANGED) == 30 * DAY
    assert policy.next_interval(60.0, Outcome.CHANGED) == HOUR


def test_policy_from_settings() -> None:
    config = IncrecrawlConfig.from_settings(
        {
            "INCRECRAWL_CHANGE_FACTOR": 0.25,
            "INCRECRAWL_NOCHANGE_FACTOR": 2,
            "INCRECRAWL_MIN_INTERVAL": 60,
        }
    )
    policy = RevisitPolicy.from_config(config)
    assert policy.next_interval(DAY, Outcome.CHANGED) == DAY / 4
    assert policy.next_interval(DAY, Outcome.UNCHANGED) == 2 * DAY


def test_policy_refuses_bad_factors() -> None:
    with pytest.raises(ValueError):
        RevisitPolicy(change_factor=1.5)
    with pytest.raises(ValueError):
        RevisitPolicy(min_interval=10, max_interval=5)
