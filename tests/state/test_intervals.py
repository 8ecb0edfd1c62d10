"""The adaptive policy's interval arithmetic through the store, over a page's whole
history, on each storage (the learned policy's own expectations:
tests/schedule/test_revisit_policy.py)."""

from __future__ import annotations

import pytest

from increcrawl_scrapy.schedule.policy import RevisitPolicy
from increcrawl_scrapy.schedule.rows import Outcome
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.state.scenario import DAY, SEED, discover


@pytest.fixture
def policy() -> RevisitPolicy:
    """The adaptive policy only: the numbers below are its arithmetic."""
    return RevisitPolicy()


def test_a_whole_schedule_history(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/page"
    t0 = clock.now
    discover(store, SEED, [url])
    assert [p.normalized_url for p in store.due(SEED)] == [url]

    got = store.record(url, 200, seed=SEED, content_hash="h1")
    assert got.outcome is Outcome.NEW
    assert (got.page.interval_s, got.page.next_check) == (DAY, t0 + DAY)
    assert store.due(SEED) == []

    expected_interval = DAY
    for _ in range(3):
        clock.now = store.get(url).next_check
        expected_interval *= 1.5
        got = store.record(url, 200, seed=SEED, content_hash="h1")
        assert got.outcome is Outcome.UNCHANGED
        assert got.page.interval_s == expected_interval
        assert got.page.next_check == clock.now + expected_interval
    assert expected_interval == 3.375 * DAY

    clock.now = store.get(url).next_check
    got = store.record(url, 200, seed=SEED, content_hash="h2")
    assert got.outcome is Outcome.CHANGED
    assert got.page.interval_s == 3.375 * DAY / 2
    assert got.page.next_check == clock.now + 3.375 * DAY / 2
    assert (got.page.change_count, got.page.fetch_count) == (1, 5)
    assert got.page.last_changed == clock.now

    clock.now = store.get(url).next_check
    got = store.record(url, 410, seed=SEED)
    assert got.outcome is Outcome.GONE
    assert got.page.gone is True
    # Still listed: re-checked slowly (twice the default interval), not at once.
    assert got.page.next_check == clock.now + 2 * DAY
    clock.advance(2 * DAY - 1)
    assert store.due(SEED) == []
    clock.advance(1)
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    again = store.record(url, 410, seed=SEED)
    assert again.outcome is Outcome.STILL_GONE and again.outcome.change == "unchanged"
    assert again.page.next_check == clock.now + 4 * DAY  # the wait doubles
    assert again.page.change_count == got.page.change_count  # gone is reported once
    store.close()
    reopened = StateStore(store.path, clock=clock)
    page = reopened.get(url)
    assert page.gone and page.content_hash == "h2" and page.fetch_count == 7
    reopened.close()
