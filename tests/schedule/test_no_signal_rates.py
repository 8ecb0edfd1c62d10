"""Where nothing but the pages themselves says when they change (no sitemap dates),
the learned policy's estimates against the same policy told each page's true rate
(the simulator's oracle, ``benchmarks/simulate.py``): five weeks of runs every 3
hours on a moved clock, the real StateStore (#52: the no-signal row at most 1.10x
the oracle's requests at its share, measured at 50,000 pages by hand)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks import simulate


def test_pages_seen_changing_are_checked_near_their_true_rate() -> None:
    # A page is seen changing because it did: its first changes overstated its
    # rate, and the site's monthly pages were checked about twice as often as
    # their true rate asks (1.19x the oracle's requests a week for about as much
    # caught). Their host's posterior pulls them back.
    figures = {
        policy: simulate.simulate(simulate.Job(policy, "never", 7, 5_000, 6, 3.0))
        for policy in ("learned", "oracle")
    }
    learned, oracle = figures["learned"], figures["oracle"]
    ratio = learned["steady_per_week"] / oracle["steady_per_week"]
    assert ratio <= 1.12, f"{ratio:.2f}x the true rates' requests"
    assert learned["detected"] >= oracle["detected"] - 0.005
