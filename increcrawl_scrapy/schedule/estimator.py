"""How often a page changes, from what its fetches saw.

A page is modelled as changing at random with a constant rate λ (a Poisson
process). A fetch after an interval τ since the previous one tells only whether the
page changed at least once in between, not how often: a page fetched weekly that
changes daily looks the same as one that changes weekly. Counting changes per time
(the naive estimator) therefore underestimates fast pages, worse the longer and
more irregular the intervals.

We use the maximum-likelihood estimator for exactly these observations (Cho and
Garcia-Molina, "Estimating frequency of change", 2003, section 4, irregular
intervals): with intervals τᵢ after which a change was seen and intervals τⱼ after
which none was, λ solves

    Σ_changed τᵢ / (e^{λτᵢ} - 1) = Σ_unchanged τⱼ.

The right side is one number, so a page keeps a sufficient statistic in bounded
space: the total unchanged time, how many observations there were, and the
intervals of its last few changed observations (older ones are folded away, see
:func:`observe`). Old evidence fades: at each observation everything seen before
weighs half as much per HALF_LIFE elapsed, so a page stable for years that starts
changing daily is checked at its new pace within weeks, not after as long again
(without fading: 438 days to reach a weekly check). Smoothing adds one
pseudo-observation of each kind, as long as the page's mean interval between
fetches (``prior`` before any), so that a page
never seen changing (or always seen changing) still gets a finite rate without the
prior outweighing the page's own evidence: with no evidence the estimate is
ln 2 / prior (even odds of a change within one prior interval).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

#: Changed intervals kept per page; older ones are folded away.
KEEP_CHANGED = 24
#: Weight of each smoothing pseudo-observation, against the page's own ones: its
#: pseudo change pulls a page that changed up toward a change per mean interval
#: (at 0.5, the no-signal simulator spent 3% more requests for less caught); below
#: about 0.12 it would lengthen the waits of pages never seen changing too.
PSEUDO_WEIGHT = 0.25
#: Evidence this old weighs half (seconds): long against monthly pages, whose rate
#: needs months of evidence, short against a habit that changed.
HALF_LIFE = 90 * 86_400.0
#: A changed interval faded below this weight is dropped.
MIN_WEIGHT = 0.01


@dataclass(frozen=True)
class History:
    """What a page's fetches saw: the intervals (seconds) of the observations that
    found a change, and the total length of those that found none."""

    changed: tuple[float, ...] = ()
    unchanged_time: float = 0.0
    count: float = 0.0  # observations behind the above (fractional once faded)
    #: The weight of each changed interval (1 when new, fading); empty: all 1.
    weights: tuple[float, ...] = ()

    def weight_of(self) -> tuple[float, ...]:
        return self.weights or (1.0,) * len(self.changed)

    def mean_interval(self, default: float) -> float:
        if self.count < 1:
            return default
        changed = sum(w * tau for w, tau in zip(self.weight_of(), self.changed, strict=True))
        return (changed + self.unchanged_time) / max(self.count, sum(self.weight_of()))

    def encode(self) -> str:
        """The changed intervals as stored (a short text column): ``tau`` or, once
        faded, ``tau:weight``."""
        return ",".join(
            f"{tau:.0f}" if w >= 0.9995 else f"{tau:.0f}:{w:.3f}"
            for tau, w in zip(self.changed, self.weight_of(), strict=True)
        )

    @classmethod
    def decode(
        cls, changed: str | None, unchanged_time: float | None, count: float | None
    ) -> History:
        parts = [part.partition(":") for part in changed.split(",") if part] if changed else []
        values = tuple(float(tau) for tau, _, _ in parts)
        weights = tuple(float(w) if w else 1.0 for _, _, w in parts)
        if all(w == 1.0 for w in weights):
            weights = ()  # rows written before evidence faded read as they were
        return cls(values, unchanged_time or 0.0, count or 0.0, weights)


def observe(history: History, interval: float, changed: bool) -> History:
    """*history* after one more observation (a fetch *interval* seconds after the
    previous one, which found a change or not). What was seen before fades by
    half per HALF_LIFE of *interval*. Bounded: when more than KEEP_CHANGED changed
    intervals are kept, the oldest goes, and the unchanged time is scaled down in
    the same proportion, so old evidence fades evenly."""
    interval = max(interval, 1.0)
    fade = 0.5 ** (interval / HALF_LIFE)
    pairs = [
        (tau, w * fade)
        for tau, w in zip(history.changed, history.weight_of(), strict=True)
        if w * fade >= MIN_WEIGHT
    ]
    unchanged, count = history.unchanged_time * fade, history.count * fade + 1
    if not changed:
        unchanged += interval
    else:
        pairs.append((interval, 1.0))
        if len(pairs) > KEEP_CHANGED:
            # The oldest goes, and the unchanged time and the count shrink in
            # proportion: the evidence stays a moving window.
            pairs = pairs[1:]
            scale = KEEP_CHANGED / (KEEP_CHANGED + 1)
            unchanged, count = unchanged * scale, count * scale
    kept = tuple(tau for tau, _ in pairs)
    weights = tuple(w for _, w in pairs)
    return History(kept, unchanged, count, weights if any(w < 1 for w in weights) else ())


@functools.lru_cache(maxsize=4096)
def change_rate(history: History, prior: float) -> float:
    """The smoothed maximum-likelihood change rate (changes per second); cached, as
    the policy asks twice per fetch (the interval, the rate stored for budgets)."""
    pseudo = history.mean_interval(prior)
    return mle_rate(
        history.changed,
        history.unchanged_time + PSEUDO_WEIGHT * pseudo,
        pseudo=(pseudo, PSEUDO_WEIGHT),
        weights=history.weight_of(),
    )


def mle_rate(
    changed: Sequence[float],
    unchanged_time: float,
    pseudo: tuple[float, float] = (0.0, 0.0),
    weights: Sequence[float] | None = None,
) -> float:
    """λ solving Σ wᵢτᵢ/(e^{λτᵢ} - 1) = *unchanged_time* (bisection on log λ: the
    left side falls monotonically from +∞ to 0 as λ grows). *pseudo* is one more
    changed interval with a weight: ``(τ, w)``; *weights* those of *changed* (1)."""
    tau0, weight = pseudo
    if weights is None:
        weights = (1.0,) * len(changed)
    if not changed and not weight:
        return 0.0
    if unchanged_time <= 0:
        return math.inf
    if not changed:
        # Only the pseudo interval: w·τ₀/(e^{λτ₀} - 1) = U solves in closed form (most
        # pages never change, and this runs at every fetch of each).
        return math.log1p(weight * tau0 / unchanged_time) / tau0

    def excess(rate: float) -> float:
        total = sum(
            w * tau / math.expm1(min(rate * tau, 700.0))
            for tau, w in zip(changed, weights, strict=True)
        )
        if weight:
            total += weight * tau0 / math.expm1(min(rate * tau0, 700.0))
        return total - unchanged_time

    low, high = 1e-15, 1e3  # a change in 30 million years .. a thousand a second
    for _ in range(100):
        middle = math.sqrt(low * high)
        if excess(middle) > 0:
            low = middle
        else:
            high = middle
        if high / low < 1.0 + 1e-9:
            break
    return math.sqrt(low * high)


#: Where a host's pages do not change alike, the share (on a log scale) of a changed
#: page's rate that its host's posterior sets: a page is seen changing because it
#: did, so its first changes overstate its own rate (monthly pages were checked twice
#: as often as their true rate asks), while the host's posterior, fitted to a mix of
#: still and busy pages, understates a busy one's. A quarter brought the no-signal
#: simulator from 1.16-1.21x the requests of the policy told the true rates to
#: 1.08-1.12x, catching about as much (#52).
HOST_PULL = 0.25


def change_probability(rate: float, elapsed: float) -> float:
    """The chance that a page changing at *rate* changed within *elapsed* seconds."""
    return -math.expm1(-rate * elapsed)


def interval_for(rate: float, probability: float) -> float:
    """How long until the chance of a change reaches *probability*."""
    if rate <= 0:
        return math.inf
    return -math.log1p(-probability) / rate


#: A host's pages are judged alike (their rates pooled, ``HostPrior.alike``) only on
#: enough evidence: this many pages, and changes seen on this share of them; on
#: fewer, a handful of changes always looks alike (the moment fit alone pooled a
#: docs site's pages in its first days, and pages still learning took the host's
#: small mean rate: 2 points fewer changes caught on 10,000 pages).
ALIKE_PAGES = 20
ALIKE_CHANGES_PER_PAGE = 0.05
#: Standard deviations the pages' dispersion may stand above Poisson noise and
#: still be judged alike.
ALIKE_SIGMAS = 3.0
#: A page whose changes stand this many standard deviations (plus one change) above
#: what its host's mean rate gives in its time observed is one of the host's fast
#: few (a blog's home, categories and author page beside its posts): left out of the
#: prior its host's bound is fitted to (``HostPrior.body``). The state's statement
#: ``host_rates`` applies it (squared: no square root in SQLite's core).
OUTLIER_SIGMAS = 3.0


@dataclass(frozen=True)
class HostPrior:
    """What a host's pages say about a page's change rate before its own history
    does: a gamma distribution of rates (shape *alpha*, rate *beta* in seconds),
    fitted by moments to every page's changes seen per time observed (empirical
    Bayes: a page's own history is one to three changes, its host's hundreds).
    *alike*: the pages' counts vary no more than Poisson noise would, on enough
    evidence to tell (a blog's posts, not a docs site's mix of still and daily);
    None: too little evidence to tell."""

    alpha: float
    beta: float
    alike: bool | None = None
    #: The prior fitted on the host's pages less its fast few (``OUTLIER_SIGMAS``),
    #: which sets the host's bound (``bounding``); None: no page was left out, or
    #: the rest saw no change (the whole host's fit then sets it).
    body: HostPrior | None = None

    @property
    def bounding(self) -> HostPrior:
        """The prior a page's longest wait follows: a handful of fast pages (a blog's
        home, categories, author) made 60 monthly posts unlike each other, and the
        prior fitted with them fell to almost nothing (shape 0.41, against 52
        without them): a post quiet for 25 days waited 13.6 days, not 5.5. The fast
        pages keep their own short schedules; the bound is a longest wait only."""
        return self.body or self

    def pulled(self, own: float, history: History) -> float:
        """A changed page's own rate pulled toward this host's posterior (HOST_PULL),
        on the same faded evidence as its own: on all its life, a page quiet for
        months that woke up daily was held to half its new pace for months."""
        weights = history.weight_of()
        observed = history.unchanged_time + sum(
            w * tau for w, tau in zip(weights, history.changed, strict=True)
        )
        host = self.rate(sum(weights), observed)
        if own <= 0 or host <= 0:
            return own
        return own ** (1 - HOST_PULL) * host**HOST_PULL

    def rate(self, changes: float, observed: float) -> float:
        """The posterior mean rate of a page seen changing *changes* times in
        *observed* seconds: its host's rate while its own evidence is thin, its own
        once it is not. On a host whose pages change alike (a blog's posts) it stays
        near the host's rate; where most pages never change (a docs site) it falls
        with the time the page has stood still."""
        return (self.alpha + changes) / (self.beta + max(observed, 0.0))


def host_prior(
    pages: float, changes: float, observed: float, squares: float, *body: float
) -> HostPrior | None:
    """The gamma prior of a host's page rates from its pages' totals: how many
    pages, changes seen, time observed (seconds), and Σ changes²/observed; *body*:
    the same four totals of its pages less its fast few (``OUTLIER_SIGMAS``), whose
    fit is the prior's ``body`` where they are fewer. None: no change seen yet."""
    prior = _fit(pages, changes, observed, squares)
    if prior is None or not body or body[0] >= pages:
        return prior
    return replace(prior, body=_fit(*body))


def _fit(pages: float, changes: float, observed: float, squares: float) -> HostPrior | None:
    """The moment fit: the spread of the rates is what the pages' counts vary
    beyond Poisson noise; the prior weighs at most as much as the changes it is
    fitted to (a host with few changes seen says little)."""
    if changes < 1 or observed <= 0 or pages < 2:
        return None
    mean = changes / observed
    variance = (squares - mean * changes - pages * mean) / observed
    # A spread at or below the noise: the pages change alike (alpha as strong as
    # the evidence allows).
    alpha = changes if variance <= 0 else min(changes, mean * mean / variance)
    return HostPrior(alpha, alpha / mean, alike(pages, changes, squares / mean - changes))


def alike(pages: float, changes: float, dispersion: float) -> bool | None:
    """Whether *pages* that changed *changes* times are alike: Pearson's dispersion
    statistic of their counts, Σ (kᵢ - m tᵢ)² / (m tᵢ), a chi-square of pages - 1
    degrees of freedom if they change at one rate, within ALIKE_SIGMAS of it, on
    enough pages each seen long enough that a mix would show (None: too little
    evidence either way)."""
    if pages < ALIKE_PAGES or changes < ALIKE_CHANGES_PER_PAGE * pages:
        return None
    freedom = pages - 1
    return dispersion <= freedom + ALIKE_SIGMAS * math.sqrt(2 * freedom)
