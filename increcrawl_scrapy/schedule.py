"""The revisit policy as pure functions: what a fetch means, when to look again,
and the row after a fetch. No SQL, no clock: tested without a database."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.rows import GONE_STATUSES, FetchResult, Outcome, PageState

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

__all__ = [
    "GONE_STATUSES",
    "Outcome",
    "RevisitPolicy",
    "apply_result",
    "classify",
    "new_page",
]


def classify(
    status: int,
    *,
    previous_hash: str | None,
    new_hash: str | None,
    fetched_before: bool,
    was_gone: bool = False,
) -> Outcome:
    """Decide the outcome of a fetch from the origin status and the fingerprints.
    A gone page that answers again is ``new``: it is back."""
    if status in GONE_STATUSES:
        return Outcome.STILL_GONE if was_gone else Outcome.GONE
    if status == 304 and not was_gone:
        return Outcome.NOT_MODIFIED
    if not 200 <= status < 300 or new_hash is None:
        # 5xx, other 4xx, an API failure: no evidence about the page.
        return Outcome.ERROR
    if was_gone or not fetched_before or previous_hash is None:
        return Outcome.NEW
    return Outcome.UNCHANGED if new_hash == previous_hash else Outcome.CHANGED


@dataclass(frozen=True)
class RevisitPolicy:
    """Multiplicative revisit intervals bounded by a floor and a ceiling (seconds)."""

    min_interval: float = 3_600.0
    max_interval: float = 30 * 86_400.0
    default_interval: float = 86_400.0
    change_factor: float = 0.5
    nochange_factor: float = 1.5

    def __post_init__(self) -> None:
        if not 0 < self.min_interval <= self.max_interval:
            raise ValueError("need 0 < min_interval <= max_interval")
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
        )

    def bounded(self, interval: float) -> float:
        return min(self.max_interval, max(self.min_interval, interval))

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

    def gone_recheck(self, current: float | None, was_gone: bool) -> float:
        """How long a gone page waits before it is checked again: slow (twice the
        default interval at first) and doubling while it stays gone."""
        base = self.default_interval if not was_gone or current is None else current
        return min(self.max_interval, max(base, self.default_interval) * 2)

    def error_backoff(self, streak: int) -> float:
        """The wait after *streak* consecutive failures at the site (4xx, 5xx,
        timeouts): the minimum interval, doubling, capped at the maximum."""
        return min(self.max_interval, self.min_interval * 2 ** min(streak - 1, 40))


def new_page(key: str, url: str, seed: str, now: float, interval: float) -> PageState:
    """The row of a URL discovery never saw (an embedding project's own spider)."""
    return PageState(
        normalized_url=key,
        url=url,
        seed=seed,
        first_seen=now,
        last_seen=None,
        last_fetched=None,
        next_check=0.0,
        interval_s=interval,
        content_hash=None,
        etag=None,
        last_modified=None,
        sitemap_lastmod=None,
        missing_runs=0,
        gone=False,
        last_status=None,
        last_changed=None,
        change_count=0,
        fetch_count=0,
        error_count=0,
    )


def apply_result(
    page: PageState, result: FetchResult, now: float, policy: RevisitPolicy
) -> PageState:
    """The row after a fetch result (the revisit rule, docs/architecture.md)."""
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
    changes = {
        "last_fetched": now,
        "last_status": status,
        "fetch_count": page.fetch_count + 1,
        "error_streak": 0,
        "final_url": result.final_url,
    }
    if outcome in (Outcome.GONE, Outcome.STILL_GONE):
        # Re-checked slowly while it is still listed; back as new if it answers.
        interval = policy.gone_recheck(page.interval_s, page.gone)
        changes.update(gone=True, interval_s=interval, next_check=now + interval)
        if outcome is Outcome.GONE:
            changes.update(last_changed=now, change_count=page.change_count + 1)
        return page._replace(**changes)
    interval = policy.next_interval(page.interval_s, outcome)
    changes.update(interval_s=interval, next_check=now + interval, gone=False)
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
