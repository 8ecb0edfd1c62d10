"""The revisit simulator's own plumbing on a small site (the full run is by hand:
benchmarks/simulate.py). What it reports must be what the store did."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import simulate


def run(
    policy: str, lastmod: str = "honest", pages: int = 1500, every_hours: float = 1.0, **extra
) -> dict:
    """Five weeks of runs every *every_hours* on a site of *pages* pages."""
    return simulate.simulate(simulate.Job(policy, lastmod, 7, pages, 5, every_hours, **extra))


#: A smaller site checked less often, for the comparisons that need no more: a fifth
#: of the work.
SMALL = {"pages": 600, "every_hours": 3.0}


@pytest.fixture(scope="module")
def learned() -> dict:
    return run("learned")


@pytest.fixture(scope="module")
def undated() -> dict:
    return run("learned", "never")


def test_honest_dates_cost_a_fraction_of_a_weekly_crawl(learned: dict) -> None:
    full = run("weekly-full")
    assert learned["detected"] > 0.95 > full["detected"]
    assert learned["steady_per_week"] < full["steady_per_week"] / 5
    assert learned["verdict"].startswith("trusted")
    # children are downloaded when they changed, else answered 304
    assert 0 < learned["sitemap_downloads_per_week"] < learned["sitemaps_per_week"]


def test_a_budget_spent_on_likely_changes_beats_oldest_first(learned: dict) -> None:
    adaptive = run("store", **SMALL)
    budget = max(1, round(adaptive["due_per_run"] / 2))
    likeliest = run("budget-change", budget=budget, **SMALL)
    oldest = run("budget-oldest", budget=budget, **SMALL)
    assert likeliest["detected"] > oldest["detected"]  # 1.0 and 0.63


def test_noise_the_rules_miss_is_counted_as_false_changes(learned: dict, undated: dict) -> None:
    noisy = run("learned", noise="broad")
    assert learned["false_changes"] == 0
    assert noisy["verdict"].startswith("trusted")  # the dates keep their trust...
    assert noisy["detected"] > 0.95  # ...and the real changes are still caught
    # Without dates to wait for, noisy pages are fetched on their schedule, and the
    # fingerprint cannot know better (a small site checked daily shows it as well).
    assert undated["false_changes"] == 0
    daily = {"pages": 300, "every_hours": 24.0}
    assert run("learned", "never", **daily)["false_changes"] == 0
    assert run("learned", "never", noise="broad", **daily)["false_changes"] > 0


def test_the_limit_is_the_best_proportional_allocation() -> None:
    # a budget as large as the changes catches 1 - 1/e of them; far more, nearly all
    assert simulate.limit(1000, 1000) == pytest.approx(1 - 1 / 2.718281828, rel=1e-6)
    assert simulate.limit(100_000, 1000) > 0.99
    # the figure: 86% of 1,024 changes a week needs about 3,300 requests
    assert simulate.limit_budget(0.86, 1024) == pytest.approx(3300, rel=0.03)
    needed = simulate.limit_budget(0.9, 500)
    assert simulate.limit(needed, 500) == pytest.approx(0.9, rel=1e-6)


def test_every_row_shows_its_limit(learned: dict, undated: dict) -> None:
    for result in (learned, undated):
        budget, changes = result["steady_per_week"], result["changes_per_week"]
        assert result["limit"] == simulate.limit(budget, changes)
    # Checking blind, no policy beats the limit; honest dates say when pages change.
    assert undated["detected"] <= undated["limit"]
    assert learned["detected"] > learned["limit"]


def test_ours_is_held_to_the_oracle_at_our_share_on_our_seed() -> None:
    # The oracle spends more to catch more: held to it at its own target, a policy
    # that catches 2 points more looks dearer than it is; and each seed has its own.
    def job(policy: str, seed: int, target: float | None = None) -> simulate.Job:
        return simulate.Job(policy, "never", seed, 1000, 6, 3.0, target=target)

    # The oracle's seed 1: log requests rise 5% a point of share, through 3,000 at 75%.
    results = {
        job("oracle", 1, target): {
            "detected": share,
            "steady_per_week": 3000 * 1.05 ** ((share - 0.75) * 100),
        }
        for target, share in ((None, 0.75), (0.12, 0.77), (0.21, 0.73))
    }
    results[job("oracle", 2)] = {"detected": 0.50, "steady_per_week": 100.0}  # not seed 1's
    ours = {"job": job("learned", 1), "detected": 0.77, "steady_per_week": 3000 * 1.05**2 * 1.08}
    ratio, text = simulate.against_oracle(ours, results)
    assert ratio == pytest.approx(1.08, abs=0.003)
    assert "3 targets" in text
    ours_alone = {"job": job("learned", 3), "detected": 0.77, "steady_per_week": 1.0}
    assert simulate.against_oracle(ours_alone, results) is None
