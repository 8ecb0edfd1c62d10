"""The plain types every layer shares: a page's row, a fetch result, an outcome.

They import nothing of this package, so the policy (``schedule``) and the storage
(``state``) can both build on them without an import circle.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

GONE_STATUSES = frozenset({404, 410})
#: Marks a fingerprint taken another way than today's (an upgrade, a changed setting:
#: ``state/upkeep.py``): the page's next fetch reads it whole and takes a new baseline.
OLD_FINGERPRINT = "old:"
#: A page the sitemaps no longer list that answers one of these to another page of
#: the site has moved there: its row is gone (``spiders/page_items.moved_away``).
MOVED_STATUSES = frozenset({301, 308})


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


class PageState(NamedTuple):
    """One row of ``pages`` (a tuple: cheap to build from a row and to update)."""

    normalized_url: str
    url: str
    seed: str
    first_seen: float
    last_seen: float | None
    last_fetched: float | None
    next_check: float
    interval_s: float
    content_hash: str | None
    etag: str | None
    last_modified: str | None
    sitemap_lastmod: str | None
    missing_runs: int
    gone: bool
    last_status: int | None
    last_changed: float | None
    change_count: int
    fetch_count: int
    error_count: int
    sitemap_url: str | None = None
    error_streak: int = 0
    final_url: str | None = None
    #: The change-rate estimator's history (estimator.History): changed intervals...
    change_history: str | None = None
    #: ...the time fetches found no change, and how many observations made them.
    unchanged_time: float = 0.0
    observations: float = 0.0
    #: The sitemap lastmod moved (outside a wave) since the page was last fetched.
    lastmod_moved: bool = False
    host: str | None = None
    #: Changes per second as the policy estimated them at the last fetch: the
    #: budget's order (the chance the page changed since) reads it.
    change_rate: float | None = None
    #: Fetches that found the content changed while the page's sitemap date had not
    #: moved. Only a page's first counts against its host's dates: more are the
    #: page's habit (volatile text the rules miss), not news about the dates.
    unannounced: int = 0
    #: Fetches in a row that found the content changed (``increcrawl noisy``).
    change_streak: int = 0
    #: SAMPLED: made due by its trusted host's sample (``state/lastmod.py``);
    #: SAMPLE_COUNTED: that fetch found a change its date did not announce, counted
    #: against the host's dates at once (not again at the next fetch).
    sampled: int = 0

    @property
    def has_validators(self) -> bool:
        return bool(self.etag or self.last_modified)

    @property
    def fingerprint_old(self) -> bool:
        """Whether its fingerprint was taken another way than today's (OLD_FINGERPRINT)."""
        return (self.content_hash or "").startswith(OLD_FINGERPRINT)


#: The columns of ``pages``, in PageState's order.
PAGE_COLUMNS = PageState._fields

#: Columns a fetch result writes; discovery writes the others.
RESULT_COLUMNS = (
    "last_fetched",
    "next_check",
    "interval_s",
    "content_hash",
    "etag",
    "last_modified",
    "gone",
    "last_status",
    "last_changed",
    "change_count",
    "fetch_count",
    "error_count",
    "error_streak",
    "final_url",
    "change_history",
    "unchanged_time",
    "observations",
    "lastmod_moved",
    "change_rate",
    "unannounced",
    "change_streak",
    "sampled",
)

#: ``PageState.sampled``.
SAMPLED, SAMPLE_COUNTED = 1, 2

#: What a host's sitemap dates have earned (docs/architecture.md, "Lastmod trust").
UNKNOWN, TRUSTED, NOISY, STALE = "unknown", "trusted", "noisy", "stale"


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


class FetchResult(NamedTuple):
    """What a fetch of a page brought back, as the policy needs it."""

    outcome: Outcome
    status: int | None
    content_hash: str | None = None
    #: ``(etag, last_modified)`` as the origin sent them; None when the fetcher
    #: cannot see them (the Geonode API does not return them).
    validators: tuple[str | None, str | None] | None = None
    #: The site failed the page (4xx/5xx, a timeout, an off-site redirect): it backs off.
    site_failure: bool = False
    final_url: str | None = None


@dataclass(frozen=True)
class Recorded:
    """What recording a result decided, and the row as it now stands."""

    outcome: Outcome
    page: PageState

    @property
    def never_found(self) -> bool:
        """A 404/410 of a page that never answered with content (not reported)."""
        return self.outcome is Outcome.STILL_GONE and self.page.content_hash is None


@dataclass(frozen=True)
class MissingResult:
    marked: int  # rows of the seed absent this run
    due: int  # of which reached INCRECRAWL_MISSING_RUNS and are due for a confirming fetch


@dataclass(frozen=True)
class RekeyResult:
    rekeyed: int  # rows whose key changed
    merged: int  # rows dropped because another row has the same key under the new rules


#: An item row (INCRECRAWL_ITEM_KEY) is keyed ``PAGE#item:KEY``: a label of its
#: page's item, recorded with each fetch of the page and never due on its own.
ITEM_MARK = "#item:"
#: The fingerprint of a page that is an alias of another (its rel=canonical).
ALIAS_MARK = "alias:"
NEVER = 253_402_300_799.0  # 9999-12-31T23:59:59Z: an item row's next check

#: A run's counts that are ``increcrawl/<name>`` stats of the crawl...
CRAWL_COUNTS = ("discovered", "new", "changed", "unchanged", "gone", "errors", "due")
#: ...and all of them, API usage included.
RUN_COUNTS = (*CRAWL_COUNTS, "api_requests", "tokens_charged")
