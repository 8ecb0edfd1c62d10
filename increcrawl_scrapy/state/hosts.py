"""Per host, what its sitemap ``lastmod`` dates have earned: counts of fetches where
the date moved and the page changed (or not), and the verdict they give
(``schedule.lastmod_verdict``). Buffered with the results, written with them."""

from __future__ import annotations

import logging
from datetime import datetime, timezone
from typing import Any

from increcrawl_scrapy.rows import TRUSTED, UNKNOWN, PageState
from increcrawl_scrapy.schedule import lastmod_verdict
from increcrawl_scrapy.state.database import Database

logger = logging.getLogger(__name__)

_COUNTS = ("moved_changed", "moved_unchanged", "unmoved_changed", "unmoved_unchanged")
#: Evidence is a moving window: past this many informative fetches (times the
#: minimum), every count is halved, so a host that starts lying is demoted.
_WINDOW = 10
#: A demoted host's pages: checked within the wait after their last fetch.
DEMOTE = (
    "UPDATE pages SET next_check = min(next_check, "
    "coalesce(last_fetched, first_seen) + ?) WHERE host = ? AND gone = 0"
)


class Hosts:
    def __init__(self, database: Database, min_evidence: int, demoted_wait: float) -> None:
        self.database = database
        self.min_evidence = min_evidence
        #: A host whose dates lose their trust: its pages wait no longer than this
        #: after their last fetch (they waited for dates that no longer count).
        self.demoted_wait = demoted_wait
        self._counts: dict[str, list[float]] = {}
        self._dirty: set[str] = set()

    def _load(self, host: str) -> list[float]:
        if host not in self._counts:
            self.learn(self.read(self.database, {host}))
        return self._counts[host]

    def known(self, host: str | None) -> bool:
        """Whether *host*'s counts are at hand (judging it reads nothing)."""
        return not host or host in self._counts

    def verdict(self, host: str | None) -> str:
        if not host:
            return UNKNOWN
        mc, mu, uc, _uu = self._load(host)
        return lastmod_verdict(mc, mu, uc, self.min_evidence)

    def observe(self, page: PageState, changed: bool, now: float) -> None:
        """One fetch of *page* (fetched before, with a sitemap date): did its date
        move since, and did it change? A change without a move counts once per page,
        and only if it stood alone (``PageState.unannounced``)."""
        host = page.host
        if not host or not page.sitemap_lastmod or page.last_fetched is None:
            return
        moved = page.lastmod_moved
        if changed and not moved and _same_day(page.sitemap_lastmod, page.last_fetched):
            # A date-only lastmod cannot move for a second edit on the same day.
            return
        if changed and not moved:
            # Not evidence yet: a page whose content changes at every fetch while its
            # date stands still is noise (volatile text the rules miss). Its first
            # such change counts once the next fetch finds the page unchanged; later
            # ones are the page's habit, not news about the host's dates.
            return
        counts = self._load(host)
        if page.unannounced == 1 and page.last_changed == page.last_fetched:
            counts[2] += 1  # the held change stood alone: the date missed an edit
        counts[(0 if changed else 1) if moved else 3] += 1
        if counts[0] + counts[1] + counts[2] > _WINDOW * self.min_evidence:
            counts[:] = [value / 2 for value in counts]
        self._dirty.add(host)

    def take(self) -> list[tuple[object, ...]]:
        """The rows of hosts whose counts moved, ``(host, *counts, verdict)``, for
        ``write_hosts`` with the results they came from."""
        rows = [(host, *self._counts[host], self.verdict(host)) for host in self._dirty]
        self._dirty.clear()
        return rows

    def restore(self, rows: list[tuple[object, ...]]) -> None:
        """Rows whose write failed: written again next time (the counts stand)."""
        self._dirty.update(str(row[0]) for row in rows)

    def read(self, database: Database, hosts: set[str]) -> dict[str, list[float]]:
        """The stored counts of *hosts* not known yet (on the caller's thread and
        connection: a shared state reads them with the rows it claims)."""
        wanted = sorted(host for host in hosts if host and host not in self._counts)
        found = {host: [0.0] * 4 for host in wanted}
        if wanted:
            marks = ", ".join("?" for _ in wanted)
            rows = database.execute(
                f"SELECT host, {', '.join(_COUNTS)} FROM hosts WHERE host IN ({marks})", wanted
            )
            found.update((row[0], [float(v) for v in row[1:]]) for row in rows)
        return found

    def learn(self, counts: dict[str, list[float]]) -> None:
        """Counts read by ``read``, where none are known yet."""
        for host, values in counts.items():
            self._counts.setdefault(host, values)


def write_hosts(db: Any, rows: list[tuple[Any, ...]], demoted_wait: float) -> None:
    """Write hosts' counts and verdicts (inside the results' transaction); a host
    whose dates lose their trust has its pages checked within *demoted_wait*."""
    for host, *counts, verdict in rows:
        before = db.execute("SELECT verdict FROM hosts WHERE host = ?", (host,)).fetchone()
        if before is not None and before[0] == TRUSTED and verdict != TRUSTED:
            logger.warning(
                "Sitemap dates of %s are no longer trusted (%s): its pages are "
                "checked within %.0f days of their last fetch",
                host,
                verdict,
                demoted_wait / 86_400,
            )
            db.execute(DEMOTE, (demoted_wait, host))
        db.execute(
            f"INSERT INTO hosts (host, {', '.join(_COUNTS)}, verdict) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (host) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in (*_COUNTS, "verdict")),
            (host, *counts, verdict),
        )


def _same_day(lastmod: str, fetched: float) -> bool:
    if not lastmod.endswith("T00:00:00Z"):
        return False  # a date with a time: it can move for every edit
    day = datetime.fromtimestamp(fetched, timezone.utc).strftime("%Y-%m-%d")
    return lastmod.startswith(day)
