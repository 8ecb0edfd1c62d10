"""The revisit policy as pure functions: what a fetch means and when to look again."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

GONE_STATUSES = frozenset({404, 410})


class Outcome(str, Enum):
    """What one fetch told us about a page."""

    NEW = "new"
    CHANGED = "changed"
    UNCHANGED = "unchanged"
    NOT_MODIFIED = "not_modified"
    GONE = "gone"
    STILL_GONE = "still_gone"  # a gone page re-checked, and still 404/410
    ERROR = "error"

    @property
    def change(self) -> str:
        """The item's ``change`` label (a 304, and a page still gone, are ``unchanged``)."""
        if self in (Outcome.NOT_MODIFIED, Outcome.STILL_GONE):
            return "unchanged"
        return self.value


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
