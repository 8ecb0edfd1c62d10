"""The revisit simulator's own plumbing on a small site (the full run is by hand:
benchmarks/simulate.py). What it reports must be what the store did."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import simulate


def run(policy: str, lastmod: str = "honest", **extra: object) -> dict:
    return simulate.simulate(simulate.Job(policy, lastmod, 7, 1500, 5, 1.0, **extra))


@pytest.fixture(scope="module")
def learned() -> dict:
    return run("learned")


def test_honest_dates_cost_a_fraction_of_a_weekly_crawl(learned: dict) -> None:
    full = run("weekly-full")
    assert learned["detected"] > 0.95 > full["detected"]
    assert learned["steady_per_week"] < full["steady_per_week"] / 5
    assert learned["verdict"].startswith("trusted")
    # children are downloaded when they changed, else answered 304
    assert 0 < learned["sitemap_downloads_per_week"] < learned["sitemaps_per_week"]


def test_a_budget_spent_on_likely_changes_beats_oldest_first(learned: dict) -> None:
    adaptive = run("store")
    budget = max(1, round(adaptive["due_per_run"] / 2))
    likeliest = run("budget-change", budget=budget)
    oldest = run("budget-oldest", budget=budget)
    assert likeliest["detected"] > oldest["detected"]


def test_noise_the_rules_miss_is_counted_as_false_changes(learned: dict) -> None:
    noisy = run("learned", noise="broad")
    assert learned["false_changes"] == 0
    assert noisy["false_changes"] > 0  # the fingerprint cannot know better
    assert noisy["verdict"].startswith("trusted")  # the dates keep their trust...
    assert noisy["detected"] > 0.95  # ...and the real changes are still caught
