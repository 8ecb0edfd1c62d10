"""The change-rate estimator on synthetic histories with known rates."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from increcrawl_scrapy.schedule.estimator import (
    HALF_LIFE,
    KEEP_CHANGED,
    History,
    change_probability,
    change_rate,
    interval_for,
    mle_rate,
    observe,
)

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0


def synthetic(rate: float, mean_gap: float, fetches: int, rng: random.Random) -> tuple:
    """A page changing at *rate*, fetched at irregular (exponential) gaps."""
    history, changes, elapsed = History(), 0, 0.0
    for _ in range(fetches):
        gap = rng.expovariate(1 / mean_gap)
        changed = rng.random() < change_probability(rate, gap)
        changes += changed
        elapsed += gap
        history = observe(history, gap, changed)
    return history, changes / elapsed


@pytest.mark.parametrize(
    ("rate", "gap_factor"),
    [
        (1 / HOUR, 0.5),
        (1 / DAY, 1.0),
        (1 / DAY, 3.0),
        (1 / DAY, 0.1),
        (1 / WEEK, 2.0),
        (1 / (30 * DAY), 0.3),
    ],
)
def test_the_estimate_is_close_to_the_true_rate(rate: float, gap_factor: float) -> None:
    """Median relative error within 15% over 300 pages of 60 fetches each, even when
    fetches are 3 times sparser than changes (where counting changes is far off).
    Fetched every two weeks, a weekly page keeps only its last months of evidence
    (HALF_LIFE): about nine observations, which the smoothing pulls down: 20%."""
    rng = random.Random(11)
    estimates, naive = [], []
    for _ in range(300):
        history, counted = synthetic(rate, gap_factor / rate, 60, rng)
        estimates.append(change_rate(history, prior=DAY))
        naive.append(counted)
    sparse = gap_factor / rate > HALF_LIFE / 10
    assert statistics.median(estimates) == pytest.approx(rate, rel=0.2 if sparse else 0.15)
    if gap_factor >= 3:
        assert statistics.median(naive) < 0.5 * rate  # why the naive count is not used


def test_no_evidence_means_even_odds_within_the_prior() -> None:
    rate = change_rate(History(), prior=DAY)
    assert change_probability(rate, DAY) == pytest.approx(0.5)


def test_a_page_never_seen_changing_slows_down_with_evidence() -> None:
    history = History()
    rates = []
    for _ in range(20):
        history = observe(history, 10 * DAY, changed=False)
        rates.append(change_rate(history, prior=DAY))
    assert rates == sorted(rates, reverse=True)
    assert 0 < rates[-1] < 1 / (150 * DAY)  # 200 stable days: about one change in 200


def test_a_page_always_seen_changing_stays_finite() -> None:
    history = History()
    for _ in range(30):
        history = observe(history, HOUR, changed=True)
    rate = change_rate(history, prior=DAY)
    assert math.isfinite(rate) and rate > 1 / HOUR


def test_history_stays_bounded_and_round_trips() -> None:
    history = History()
    for i in range(50):
        history = observe(history, DAY * (1 + i % 3), changed=i % 2 == 0)
    assert len(history.changed) == KEEP_CHANGED
    again = History.decode(history.encode(), history.unchanged_time, history.count)
    assert again.changed == pytest.approx(history.changed, abs=1)
    assert again.weights == pytest.approx(history.weights, abs=1e-3)
    assert History.decode(None, None, None) == History()
    # a row written before evidence faded reads as it was: every weight 1
    assert History.decode("3600,7200", 5.0, 3.0) == History((3600.0, 7200.0), 5.0, 3.0)


def test_old_evidence_fades() -> None:
    """Evidence a half-life old weighs half: a page that stood still for a year and
    is now seen changing weighs the year as a few months."""
    history = observe(History(), 365 * DAY, changed=False)
    history = observe(history, HALF_LIFE, changed=True)
    assert history.unchanged_time == pytest.approx(365 * DAY / 2)
    assert history.count == pytest.approx(1.5)
    history = observe(history, HALF_LIFE, changed=False)
    assert history.weights == pytest.approx((0.5,))
    assert history.unchanged_time == pytest.approx(365 * DAY / 4 + HALF_LIFE)


def test_the_mle_solves_its_equation() -> None:
    changed, unchanged = [DAY, 2 * DAY, 0.5 * DAY], 9 * DAY
    rate = mle_rate(changed, unchanged)
    total = sum(tau / math.expm1(rate * tau) for tau in changed)
    assert total == pytest.approx(unchanged, rel=1e-6)


def test_the_interval_reaches_the_target_probability() -> None:
    rate = 1 / DAY
    assert change_probability(rate, interval_for(rate, 0.25)) == pytest.approx(0.25)
    assert interval_for(0.0, 0.25) == math.inf


@pytest.mark.parametrize("unchanged", [600.0, 86_400.0, 90 * 86_400.0])
def test_the_closed_form_for_pages_never_seen_changing_solves_the_equation(
    unchanged: float,
) -> None:
    from increcrawl_scrapy.schedule.estimator import mle_rate

    tau0, weight = 86_400.0, 0.5
    rate = mle_rate([], unchanged, pseudo=(tau0, weight))
    assert weight * tau0 / math.expm1(rate * tau0) == pytest.approx(unchanged, rel=1e-9)
    # and agrees with the general solver given the same interval as a real one
    assert mle_rate([tau0], unchanged / weight) == pytest.approx(rate, rel=1e-6)


def test_a_hosts_prior_holds_quiet_pages_of_a_homogeneous_host_to_its_rate() -> None:
    from increcrawl_scrapy.schedule.estimator import host_prior

    day = 86_400.0
    # 60 pages watched 30 days, each changed once (all alike): the host's rate is
    # one change a month, and a page quiet for 30 days is still taken at it.
    alike = host_prior(60, 60, 60 * 30 * day, 60 * 1 / (30 * day))
    assert alike is not None
    assert alike.rate(0, 30 * day) * 30 * day == pytest.approx(1.0, rel=0.05)
    # 6 pages changing daily, 54 never: the spread prior lets a quiet page's rate
    # fall with the time it stood still.
    spread = host_prior(60, 6 * 30, 60 * 30 * day, 6 * 30 * 30 / (30 * day))
    assert spread is not None
    assert spread.rate(0, 60 * day) < spread.rate(0, 10 * day) / 3
    assert host_prior(60, 0, 60 * 30 * day, 0) is None  # no change seen: nothing to say


def test_a_host_is_judged_alike_only_on_enough_evidence() -> None:
    # The default simulated site's first days (#52): 10,000 pages seen a day, the
    # 40 changes all on pages that change daily (one each). The moment fit finds no
    # spread beyond the noise (alpha = 40): pooled, every learning page took the
    # host's small mean rate. Too little evidence to judge: not alike.
    from increcrawl_scrapy.schedule.estimator import host_prior

    day = 86_400.0
    early = host_prior(10_000, 40, 10_000 * day, 40 / day)
    assert early is not None and early.alpha >= 1  # the fit alone looks alike
    assert early.alike is None
    # Weeks later, 600 pages changing daily (20 changes each in 20 days) and the
    # rest never: plainly not alike, whatever the fit's shape.
    mixed = host_prior(10_000, 12_000, 10_000 * 20 * day, 600 * 20 * 20 / (20 * day))
    assert mixed is not None and mixed.alike is False
    # 60 posts watched 30 days, each changed once: alike, pooled.
    posts = host_prior(60, 60, 60 * 30 * day, 60 * 1 / (30 * day))
    assert posts is not None and posts.alike is True


def test_a_hosts_bound_is_fitted_without_its_few_fast_pages() -> None:
    # 60 posts watched 25 days, each changed once, and what WordPress adds beside
    # them: 6 listings changed 12 times each. With them the pages are unlike and the
    # prior weak: a post quiet for 25 days would wait about as long as its own thin
    # history says. Its bound follows the posts' own fit: near a month's rate.
    from increcrawl_scrapy.schedule.estimator import host_prior, interval_for

    day = 86_400.0
    t = 25 * day
    posts = (60, 60, 60 * t, 60 / t)
    everything = (66, 60 + 72, 66 * t, 60 / t + 6 * 144 / t)
    prior = host_prior(*everything, *posts)
    assert prior is not None and prior.alike is False and prior.alpha < 1
    assert prior.body is not None and prior.bounding is prior.body and prior.body.alpha > 30
    wait = interval_for(prior.bounding.rate(0, t), 0.17) / day
    assert 4 <= wait <= 7, wait
    assert interval_for(prior.rate(0, t), 0.17) / day > 10  # the fit with them
    # Where no page stands out, there is no body of its own.
    alike = host_prior(*posts, *posts)
    assert alike is not None and alike.body is None and alike.bounding is alike
