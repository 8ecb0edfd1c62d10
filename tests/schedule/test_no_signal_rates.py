"""Where nothing but the pages themselves says when they change (sitemap dates that
never move), the learned policy's estimates against the same policy told each page's
true rate (the simulator's oracle, ``benchmarks/simulate.py``), on the real StateStore
with a moved clock (#52's no-signal row, at most 1.10x the oracle's requests at its
share, is measured at 50,000 pages by hand); and a page whose pace changes."""

from __future__ import annotations

import bisect
import random
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import simulate
from increcrawl_scrapy.schedule.policy import LearnedPolicy
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock

SEED = "https://site.example/sitemap.xml"
HOUR, DAY = 3_600.0, 86_400.0


def test_pages_seen_changing_are_checked_near_their_true_rate() -> None:
    # A page is seen changing because it did: its first changes overstated its
    # rate, and the site's monthly pages were checked about twice as often as
    # their true rate asks. Their host's posterior pulls them back. Held to the
    # oracle at the same share caught (#52's row; its line through two of its
    # targets): here 1.05x, 1.12x without the pull.
    def job(policy: str, target: float | None = None) -> simulate.Job:
        return simulate.Job(policy, "never", 7, 5_000, 6, 3.0, target=target)

    results = {j: simulate.simulate(j) for j in (job("oracle"), job("oracle", 0.12))}
    learned = simulate.simulate(job("learned"))
    found = simulate.against_oracle(learned, results)
    assert found is not None
    ratio, text = found
    assert ratio <= 1.10, text


def _changes(rng: random.Random, rate: Callable[[float], float], end: float) -> list[float]:
    """When a page whose rate at time t is rate(t) changes (thinned from 1 a day)."""
    at, times = 0.0, []
    while (at := at + rng.expovariate(1 / DAY)) < end:
        if rng.random() < rate(at) * DAY:
            times.append(at)
    return times


def test_a_page_that_wakes_up_on_a_mixed_host_is_checked_at_its_new_pace(tmp_path: Path) -> None:
    # Pulled toward its host's posterior on all its life, a page edited every two
    # months for two years, then daily, was checked at half its new pace for months:
    # here 0.32 of an always-daily page's requests 11-19 weeks after it woke, where
    # its faded evidence gives 0.63 (0.59 before the pull).
    days, woke = 870, 730
    rng = random.Random(1)
    rates: dict[str, Callable[[float], float]] = {f"still{i}": lambda t: 0.0 for i in range(40)}
    rates |= {f"monthly{i}": lambda t: 1 / (30 * DAY) for i in range(12)}
    rates["daily"] = lambda t: 1 / DAY
    rates["wakes"] = lambda t: 1 / DAY if t >= woke * DAY else 1 / (60 * DAY)
    changes = {name: _changes(rng, rate, days * DAY) for name, rate in rates.items()}
    clock = Clock(0.0)
    fetched: dict[str, int] = dict.fromkeys(rates, 0)
    window = (days - 63) * DAY, (days - 7) * DAY  # eight weeks, months after the wake
    with StateStore(tmp_path / "s.sqlite", policy=LearnedPolicy(), clock=clock) as store:
        while clock.now < days * DAY:  # an hourly cron, no sitemap dates
            run = store.start_run(SEED)
            run.upsert([(f"https://site.example/{name}", None) for name in rates])
            for row in store.due(SEED, None):
                name = row.url.rsplit("/", 1)[1]
                version = bisect.bisect_right(changes[name], clock.now)
                store.record(row.url, 200, seed=SEED, content_hash=f"{name}{version}")
                fetched[name] += window[0] <= clock.now < window[1]
            run.finish({}, discovery_complete=True)
            clock.advance(HOUR)
    assert fetched["wakes"] >= 0.5 * fetched["daily"], (fetched["wakes"], fetched["daily"])
