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
    ERROR = "error"

    @property
    def change(self) -> str:
        """The item's ``change`` label (a 304 is reported as ``unchanged``)."""
        return "unchanged" if self is Outcome.NOT_MODIFIED else self.value


def classify(
    status: int, *, previous_hash: str | None, new_hash: str | None, fetched_before: bool
) -> Outcome:
    """Decide the outcome of a fetch from the origin status and the fingerprints."""
    if status == 304:
        return Outcome.NOT_MODIFIED
    if status in GONE_STATUSES:
        return Outcome.GONE
    if not 200 <= status < 300 or new_hash is None:
        # 5xx, other 4xx, an API failure: no evidence about the page.
        return Outcome.ERROR
    if not fetched_before or previous_hash is None:
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
