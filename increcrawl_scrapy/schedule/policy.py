"""The revisit policy as pure functions: what a fetch means, when to look again,
and the row after a fetch. No SQL, no clock: tested without a database."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.schedule.dates import (
    CLEAN_EVIDENCE,
    first_unannounced,
    lastmod_verdict,
    observed,
    sample_found_change,
    unannounced,
)
from increcrawl_scrapy.schedule.estimator import History, HostPrior, change_rate, interval_for
from increcrawl_scrapy.schedule.rows import (
    ALIAS_MARK,
    GONE_STATUSES,
    MOVED_STATUSES,
    SAMPLE_COUNTED,
    TRUSTED,
    UNKNOWN,
    FetchResult,
    Outcome,
    PageState,
    new_page,
)

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

__all__ = [
    "CLEAN_EVIDENCE",
    "GONE_STATUSES",
    "LearnedPolicy",
    "Outcome",
    "RevisitPolicy",
    "apply_result",
    "classify",
    "lastmod_verdict",
    "new_page",
    "policy_from_config",
]

#: Observations a page needs before its own change rate is trusted over the adaptive rule.
MIN_OBSERVATIONS = 3
#: Learned intervals vary by up to ±5%: too little to move a check across a day, so
#: the checks are also spread over the coming days (``leveling.py``) once learned.
JITTER = 0.05
#: Without its own estimate a page is taken to reach this chance of a change in one
#: interval (the learned policy's default target): the rate its interval implies.
BUDGET_PROBABILITY = 0.1
BUDGET_RATE_FACTOR = -math.log1p(-BUDGET_PROBABILITY)
#: A page never seen changing that has stood still this long (seconds) is taken
#: for one that never changes: it waits SETTLED_FACTOR times as long, up to the
#: stable ceiling. By then the monthly pages among such pages have shown themselves
#: (each stays hidden with a chance of e^-1.5), and the rest are most of a site.
SETTLE_AFTER = 45 * 86_400.0
SETTLED_FACTOR = 3.0
#: The target after a fetch that found a change, when the policy's own is looser: a
#: change is the news most likely to mean the estimate is behind (a page that woke
#: up), so the next check comes at the stricter odds; unchanged fetches relax back.
CHANGED_PROBABILITY = 0.1
#: Changes seen (this one included) from which a change is no such news: the estimate
#: already counts the earlier ones, and the stricter odds would only spend more on a
#: page whose pace is known. Unless the fetch before found a change too: a streak says
#: the estimate is behind (a page that woke up is checked at its new pace within weeks).
KNOWN_CHANGES = 2


def classify(
    status: int,
    *,
    previous_hash: str | None,
    new_hash: str | None,
    fetched_before: bool,
    was_gone: bool = False,
    never_delivered: bool = False,
    moved: bool = False,
) -> Outcome:
    """Decide the outcome of a fetch from the origin status and the fingerprints.
    A gone page that answers again is ``new``: it is back. A 404/410 of a page
    *never_delivered* (nothing of it can have reached a feed: a dead sitemap entry
    at its first fetch) is ``still_gone``, not ``gone``: nothing to delete downstream.
    A permanent redirect is gone when the page *moved* (it answered one to another page
    of the site); any other (off-site, say) is an error."""
    if status in GONE_STATUSES or (moved and status in MOVED_STATUSES):
        return Outcome.STILL_GONE if was_gone or never_delivered else Outcome.GONE
    if status == 304 and not was_gone:
        return Outcome.NOT_MODIFIED
    if not 200 <= status < 300 or new_hash is None:
        # 5xx, other 4xx, an API failure: no evidence about the page.
        return Outcome.ERROR
    if was_gone or not fetched_before or previous_hash is None:
        return Outcome.NEW
    if previous_hash.startswith(ALIAS_MARK) and new_hash != previous_hash:
        return Outcome.NEW  # an alias never reported: a page of its own from now on
    return Outcome.UNCHANGED if new_hash == previous_hash else Outcome.CHANGED


@dataclass(frozen=True)
class RevisitPolicy:
    """Multiplicative revisit intervals bounded by a floor and a ceiling (seconds)."""

    min_interval: float = 3_600.0
    max_interval: float = 30 * 86_400.0
    default_interval: float = 86_400.0
    change_factor: float = 0.5
    nochange_factor: float = 1.5
    #: INCRECRAWL_MAX_STALENESS: no page waits longer after a fetch (None: no bound).
    max_staleness: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.min_interval <= self.max_interval:
            raise ValueError("need 0 < min_interval <= max_interval")
        if self.max_staleness is not None and self.max_staleness <= 0:
            raise ValueError("need max_staleness > 0")
        if not 0 < self.change_factor <= 1 or self.nochange_factor < 1:
            raise ValueError("need 0 < change_factor <= 1 <= nochange_factor")

    @classmethod
    def from_config(cls, config: IncrecrawlConfig) -> RevisitPolicy:
        return cls(
            min_interval=config.min_interval,
            max_interval=config.max_interval,
            default_interval=config.default_interval,
            change_factor=config.change_factor,
            nochange_factor=config.nochange_factor,
            max_staleness=config.max_staleness,
        )

    name = "adaptive"

    def spreads(self, fetches: int, prior: HostPrior | None = None) -> bool:
        """Whether the next check of a page fetched *fetches* times on a host with
        *prior* is spread over the coming days (``leveling.py``): never, the adaptive
        rule's intervals are exact."""
        return False

    def bounded(self, interval: float) -> float:
        return min(self.max_interval, max(self.min_interval, interval))

    def within_staleness(self, interval: float) -> float:
        """*interval*, no longer than the user's hard bound."""
        return interval if self.max_staleness is None else min(interval, self.max_staleness)

    def next_interval(self, current: float | None, outcome: Outcome) -> float:
        """The interval after *outcome*, given the row's *current* interval."""
        if outcome is Outcome.NEW:
            return self.bounded(self.default_interval)  # no evidence yet
        interval = self.default_interval if current is None else current
        if outcome is Outcome.CHANGED:
            return self.bounded(interval * self.change_factor)
        if outcome in (Outcome.UNCHANGED, Outcome.NOT_MODIFIED):
            return self.bounded(interval * self.nochange_factor)
        return interval  # gone and error leave the interval as it was

    def interval_after(
        self,
        page: PageState,
        outcome: Outcome,
        history: History,
        now: float,
        verdict: str,
        prior: HostPrior | None = None,
    ) -> float:
        """The interval after a fetch with *outcome* (the adaptive rule: it looks at
        the page's current interval only, not at its host's *prior*)."""
        return self.next_interval(page.interval_s, outcome)

    def rate_after(self, page: PageState, history: History, interval: float) -> float:
        """The change rate the budget orders by: here, the rate at which a page
        would reach BUDGET_PROBABILITY in one interval (the interval says it all)."""
        return BUDGET_RATE_FACTOR / interval

    @property
    def demoted_max_interval(self) -> float:
        """The longest a page of a host whose dates lost their trust may still wait."""
        return self.max_interval

    @property
    def trusted_wait(self) -> float | None:
        """How long a page whose date stands still waits once its host's dates earn
        trust (None: trust changes no wait)."""
        return None

    def gone_recheck(self, current: float | None, was_gone: bool) -> float:
        """How long a gone page waits before it is checked again: slow (twice the
        default interval at first) and doubling while it stays gone."""
        base = self.default_interval if not was_gone or current is None else current
        return min(self.max_interval, max(base, self.default_interval) * 2)

    def error_backoff(self, streak: int) -> float:
        """The wait after *streak* consecutive failures at the site (4xx, 5xx,
        timeouts): the minimum interval, doubling, capped at the maximum."""
        return min(self.max_interval, self.min_interval * 2 ** min(streak - 1, 40))


@dataclass(frozen=True)
class LearnedPolicy(RevisitPolicy):
    """Check a page when the chance that it changed since its last fetch reaches
    *target_probability*, from its estimated change rate (``estimator``), between
    the minimum interval and a ceiling that grows with the evidence that the page
    is stable (twice the time it has been seen stable, at most *stable_max*).
    A page never seen changing waits at least *unchanged_factor* times the time it
    has been seen unchanged (most pages never change: one that has stood still for a
    month is likelier one of them than a monthly page the smoothing assumes), and
    once it has stood still SETTLE_AFTER, SETTLED_FACTOR times that long (at most
    *stable_max*). Pages with fewer than MIN_OBSERVATIONS observations follow the
    adaptive rule. On a host whose sitemap dates are trusted, a page whose ``lastmod``
    has not moved waits *trusted_max*: its dates say when it changes, and the host's
    sample (``state/lastmod.py``) keeps checking that they still do."""

    target_probability: float = 0.17
    stable_max_interval: float = 180 * 86_400.0
    trusted_max_interval: float = 730 * 86_400.0
    unchanged_factor: float = 1.5

    name = "learned"

    def interval_after(
        self,
        page: PageState,
        outcome: Outcome,
        history: History,
        now: float,
        verdict: str,
        prior: HostPrior | None = None,
    ) -> float:
        if verdict == TRUSTED and page.sitemap_lastmod and first_unannounced(page, outcome):
            # A change its date did not announce, held until the next fetch says
            # whether it stood alone (evidence that the dates went stale) or was
            # noise: that fetch comes soon, not after the trusted hosts' wait.
            return self.bounded(self.default_interval)
        if verdict == TRUSTED and page.sitemap_lastmod:
            wanted = ceiling = self.trusted_max_interval
        elif outcome is Outcome.NEW or _observations(page) < MIN_OBSERVATIONS:
            return self.within_host_bound(page, outcome, prior, now)
        else:
            ceiling = self.ceiling(page, outcome, now)
            rate = change_rate(history, self.default_interval)
            pooled = prior is not None and prior.alike is True
            if pooled and prior:  # the host's pages change alike (``estimator.alike``):
                # its rate is the page's, both ways, a burst no more news than a quiet spell
                rate = self.posterior_rate(page, outcome, prior, now)
            elif prior is not None and history.changed:  # pages unlike: ``HOST_PULL``
                rate = prior.pulled(rate, history)
            target = self.target_probability
            if (
                outcome is Outcome.CHANGED
                and not pooled
                and (len(history.changed) < KNOWN_CHANGES or page.change_streak)
            ):
                target = min(target, CHANGED_PROBABILITY)
            wanted = interval_for(rate, target)
            if not history.changed:
                wanted = max(wanted, self.unchanged_factor * history.unchanged_time)
                still = stood_still(page, outcome, now)
                if still >= SETTLE_AFTER:
                    wanted = ceiling = min(self.stable_max_interval, SETTLED_FACTOR * still)
        wanted *= _jitter(page.normalized_url, page.fetch_count)
        if verdict != TRUSTED or not page.sitemap_lastmod:  # the bound after the jitter
            ceiling = min(ceiling, self.host_bound(page, outcome, prior, now))
        return min(ceiling, max(self.min_interval, wanted))

    def rate_after(self, page: PageState, history: History, interval: float) -> float:
        """The page's own estimate once it has enough history."""
        if _observations(page) < MIN_OBSERVATIONS:
            return super().rate_after(page, history, interval)
        return change_rate(history, self.default_interval)

    def within_host_bound(
        self, page: PageState, outcome: Outcome, prior: HostPrior | None, now: float
    ) -> float:
        """The adaptive rule's interval for a page still learning, within its host's bound."""
        wanted = self.next_interval(page.interval_s, outcome)
        return max(self.min_interval, min(wanted, self.host_bound(page, outcome, prior, now)))

    def spreads(self, fetches: int, prior: HostPrior | None = None) -> bool:
        """From a page's third fetch, unless its host's pages are known not to change
        alike (``HostPrior.alike``). The first
        checks after discovery stay as they are: spread, they would carry the first
        week's load (every page checked three times) into the second. Pages that
        change alike wait alike and stay in lockstep; pages of different rates fall
        out of it by themselves, and every check brought forward is a request spent
        sooner (spreading them cost 8% more requests on a 10,000-page site, for no
        change caught more)."""
        return fetches >= MIN_OBSERVATIONS and (prior is None or prior.alike is not False)

    def host_bound(
        self, page: PageState, outcome: Outcome, prior: HostPrior | None, now: float
    ) -> float:
        """The longest wait the page's host justifies: the page's rate as its host's
        pages and its own changes tell it (``HostPrior.rate``) reaches the target
        probability. A page quiet for weeks on a host whose pages change every few
        weeks is not left for months; on a host where most pages never change, the
        bound grows with the time the page has stood still. Fitted without the host's
        few fast pages (``HostPrior.bounding``)."""
        rate = None if prior is None else self.posterior_rate(page, outcome, prior.bounding, now)
        return math.inf if rate is None else interval_for(rate, self.target_probability)

    @staticmethod
    def posterior_rate(page: PageState, outcome: Outcome, prior: HostPrior, now: float) -> float:
        """The page's rate as its host's pages and its own changes tell it."""
        return prior.rate(page.change_count + (outcome is Outcome.CHANGED), now - page.first_seen)

    def ceiling(self, page: PageState, outcome: Outcome, now: float) -> float:
        """Twice the time the page has been seen stable, within
        [max_interval, stable_max_interval]."""
        evidence = stood_still(page, outcome, now)
        return min(self.stable_max_interval, max(self.max_interval, 2 * evidence))

    @property
    def demoted_max_interval(self) -> float:
        return self.stable_max_interval

    @property
    def trusted_wait(self) -> float | None:
        return self.trusted_max_interval


def policy_from_config(config: IncrecrawlConfig) -> RevisitPolicy:
    """The policy ``INCRECRAWL_POLICY`` names."""
    adaptive = RevisitPolicy.from_config(config)
    if config.policy == "adaptive":
        return adaptive
    return LearnedPolicy(
        **asdict(adaptive),
        target_probability=config.target_change_probability,
        stable_max_interval=config.stable_max_interval,
        trusted_max_interval=config.trusted_max_interval,
    )


def stood_still(page: PageState, outcome: Outcome, now: float) -> float:
    """How long the page has been seen stable (seconds), this fetch's *outcome* included."""
    stable_since = now if outcome is Outcome.CHANGED else page.last_changed or page.first_seen
    return max(0.0, now - stable_since)


def _observations(page: PageState) -> int:
    """The observations behind the page's history, this fetch's included (every
    fetch after the first is one; the history's own count fades with its evidence)."""
    return page.fetch_count


def _jitter(key: str, salt: int) -> float:
    """A factor in [1 - JITTER, 1 + JITTER], the same for the same page and fetch."""
    digest = hashlib.blake2b(f"{salt}:{key}".encode(), digest_size=8).digest()
    return 1 - JITTER + 2 * JITTER * int.from_bytes(digest, "big") / 2**64


def apply_result(
    page: PageState,
    result: FetchResult,
    now: float,
    policy: RevisitPolicy,
    verdict: str = UNKNOWN,
    prior: HostPrior | None = None,
    place: Callable[[float, float, bool], float] | None = None,
) -> PageState:
    """The row after a fetch result (the revisit rule, docs/architecture.md);
    *verdict* is what the page's host's sitemap dates have earned, *prior* what its
    host's pages say about change rates; *place* (``leveling.py``) spreads the next
    check of a page over the coming days, once the policy spreads it."""
    outcome, status = result.outcome, result.status
    if outcome is Outcome.ERROR:
        changes: dict[str, Any] = {
            "error_count": page.error_count + 1,
            "last_status": status if status else page.last_status,
        }
        if result.site_failure:
            # The site failed this page: wait longer after each failure in a row,
            # so a page that always fails never takes the place of the others.
            streak = page.error_streak + 1
            changes.update(error_streak=streak, next_check=now + policy.error_backoff(streak))
        return page._replace(**changes)
    history = observed(page, outcome, now, verdict)
    changes = {
        "last_fetched": now,
        "last_status": status,
        "fetch_count": page.fetch_count + 1,
        "error_streak": 0,
        "final_url": result.final_url,
        "change_history": history.encode() or None,
        "unchanged_time": history.unchanged_time,
        "observations": history.count,
        "lastmod_moved": False,
        "unannounced": unannounced(page, outcome),
        "change_streak": page.change_streak + 1 if outcome is Outcome.CHANGED else 0,
        "sampled": SAMPLE_COUNTED if sample_found_change(page, outcome) else 0,
    }
    if outcome in (Outcome.GONE, Outcome.STILL_GONE):
        # Re-checked slowly while it is still listed; back as new if it answers.
        interval = policy.gone_recheck(page.interval_s, page.gone)
        changes.update(gone=True, interval_s=interval, next_check=now + interval)
        if outcome is Outcome.GONE:
            changes.update(last_changed=now, change_count=page.change_count + 1)
        return page._replace(**changes)
    interval = policy.within_staleness(
        policy.interval_after(page, outcome, history, now, verdict, prior)
    )
    spread = policy.spreads(page.fetch_count + 1, prior)
    changes.update(
        interval_s=interval,
        next_check=now + interval if place is None else place(now, interval, spread),
        gone=False,
        change_rate=policy.rate_after(page, history, interval),
    )
    if outcome in (Outcome.NEW, Outcome.CHANGED):
        changes.update(content_hash=result.content_hash, last_changed=now)
    if outcome is Outcome.CHANGED:
        changes["change_count"] = page.change_count + 1
    if result.validators is not None:
        etag, last_modified = result.validators
        if outcome is Outcome.NOT_MODIFIED:
            # A 304 need not repeat the validators (RFC 9110): keep the stored ones.
            etag, last_modified = etag or page.etag, last_modified or page.last_modified
        changes.update(etag=etag, last_modified=last_modified)
    elif outcome in (Outcome.NEW, Outcome.CHANGED):
        # The fetcher cannot see validators (Geonode) and the content moved on:
        # the stored ones describe older content, and a 304 to them would hide a
        # revert. They are not sent again until a direct fetch refreshes them.
        changes.update(etag=None, last_modified=None)
    return page._replace(**changes)
