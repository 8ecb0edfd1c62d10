"""Per host, what its sitemap ``lastmod`` dates have earned: counts of fetches where
the date moved and the page changed (or not), and the verdict they give
(``schedule/dates.lastmod_verdict``). Buffered with the results, written with them."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from increcrawl_scrapy.schedule.dates import lastmod_verdict, sample_found_change
from increcrawl_scrapy.schedule.estimator import HostPrior, host_prior
from increcrawl_scrapy.schedule.rows import SAMPLE_COUNTED, TRUSTED, UNKNOWN, Outcome, PageState
from increcrawl_scrapy.state.backend import Backend, Session

logger = logging.getLogger(__name__)

#: Sitemap dates remembered per host, for echoes (a bound on memory).
_DATES = 1024
#: Evidence is a moving window: past this many informative fetches (times the
#: minimum), every count is halved, so a host that starts lying is demoted.
_WINDOW = 10


class Hosts:
    def __init__(
        self,
        database: Backend,
        min_evidence: int,
        demoted_wait: float,
        trusted_wait: float | None = None,
    ) -> None:
        self.database = database
        #: A host whose dates earn trust: its pages whose dates stand still wait this
        #: long after their last fetch (None: trust changes no wait).
        self.trusted_wait = trusted_wait
        #: Per host, the dates of this store's moves that were changes, and of its
        #: moves for nothing (how many were counted): a listing dated by its newest
        #: entry moves to an edited page's date, an echo of that edit, not a move for
        #: nothing, whichever of the two is fetched first.
        self._changed_dates: dict[str, set[str]] = {}
        self._idle_dates: dict[str, dict[str, int]] = {}
        self.min_evidence = min_evidence
        #: A host whose dates lose their trust: its pages wait no longer than this
        #: after their last fetch (they waited for dates that no longer count).
        self.demoted_wait = demoted_wait
        #: Per host, the stored totals as last read, plus this store's evidence since.
        self._counts: dict[str, list[float]] = {}
        #: Per host, this store's evidence not yet taken for writing: written as
        #: increments, so that workers sharing a state add theirs up.
        self._delta: dict[str, list[float]] = {}
        #: Per undelivered result (its key), the evidence it added: taken back if discarded.
        self._undelivered: dict[str, tuple[str, list[float]]] = {}
        #: Per host, the prior of its pages' change rates, read once per run (a
        #: run's results move it little: its pages' histories are weeks long).
        self._priors: dict[str, HostPrior | None] = {}
        #: False on a shared state: priors are read with the rows (``read``, on a
        #: worker thread), never when a result is recorded.
        self.priors_in_place = True

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

    def prior(self, host: str | None) -> HostPrior | None:
        """What *host*'s pages say about a page's change rate (None: nothing yet)."""
        if not host:
            return None
        if host not in self._priors and self.priors_in_place:
            self._priors.update(self.read_priors(self.database, {host}))
        return self._priors.get(host)

    def read_priors(self, database: Backend, hosts: set[str]) -> dict[str, HostPrior | None]:
        """The priors of *hosts* not read yet this run (on the caller's connection)."""
        wanted = sorted(host for host in hosts if host and host not in self._priors)
        found: dict[str, HostPrior | None] = dict.fromkeys(wanted)
        if wanted:
            rows = database.execute(database.sql.host_rates, (json.dumps(wanted),))
            found.update((row[0], host_prior(*(float(v or 0) for v in row[1:]))) for row in rows)
        return found

    def new_run(self) -> None:
        """Priors are read again: the last run's results moved them."""
        self._priors = {}

    @staticmethod
    def planned(database: Backend, start: float, end: float) -> dict[int, int]:
        """The checks planned per coming day (``schedule/leveling.py``)."""
        rows = database.execute(database.sql.planned_days, (start, start, end))
        return {int(day): int(count) for day, count in rows}

    def observe(
        self, page: PageState, changed: bool, now: float, undelivered: str | None = None
    ) -> None:
        """One fetch of *page* (fetched before, with a sitemap date): did its date
        move since, and did it change? A change without a move counts once per page,
        and only if it stood alone (``PageState.unannounced``). The evidence of a
        result *undelivered* (its key) until delivered is taken back if it is discarded."""
        delta = self._delta.get(page.host or "")
        before = list(delta) if delta is not None else [0.0] * 4
        self._observe(page, changed)
        after = self._delta.get(page.host or "")
        if undelivered is not None and after is not None and after != before:
            self._undelivered[undelivered] = (
                page.host or "",
                [a - b for a, b in zip(after, before, strict=True)],
            )

    def delivered(self, key: str) -> None:
        self._undelivered.pop(key, None)

    def discarded(self, key: str) -> None:
        """An undelivered result was not delivered: its evidence was never seen."""
        host, added = self._undelivered.pop(key, ("", []))
        if host:
            counts, delta = self._load(host), self._delta.setdefault(host, [0.0] * 4)
            for at, value in enumerate(added):
                counts[at] -= value
                delta[at] -= value

    def _observe(self, page: PageState, changed: bool) -> None:
        host = page.host
        if not host or not page.sitemap_lastmod or page.last_fetched is None:
            return
        moved = page.lastmod_moved
        if changed and not moved and _same_day(page.sitemap_lastmod, page.last_fetched):
            # A date-only lastmod cannot move for a second edit on the same day.
            return
        counts = self._load(host)
        delta = self._delta.setdefault(host, [0.0] * 4)
        if changed and not moved:
            # Not evidence yet: a page whose content changes at every fetch while its
            # date stands still is noise (volatile text the rules miss). Its first
            # such change counts once the next fetch finds the page unchanged; later
            # ones are the page's habit, not news about the host's dates. But for a
            # change the trusted host's sample found: the sample is there to check
            # the dates, and it counts at once.
            if sample_found_change(page, Outcome.CHANGED):
                counts[2] += 1
                delta[2] += 1
            return
        if (
            page.unannounced == 1
            and page.last_changed == page.last_fetched
            and page.sampled != SAMPLE_COUNTED
        ):
            counts[2] += 1  # the held change stood alone: the date missed an edit
            delta[2] += 1
        if moved and self._echo(host, page.sitemap_lastmod, changed, counts, delta):
            return
        at = (0 if changed else 1) if moved else 3
        counts[at] += 1
        delta[at] += 1
        if _beyond_window(counts, self.min_evidence):
            counts[:] = [value / 2 for value in counts]  # as the write will halve them

    def _echo(
        self, host: str, date: str, changed: bool, counts: list[float], delta: list[float]
    ) -> bool:
        """Whether a move to *date* echoes a move of another page of *host* to the
        same date that was a change (then it is no evidence); a change takes back the
        moves for nothing to its date counted before it."""
        changed_dates = self._changed_dates.setdefault(host, set())
        idle = self._idle_dates.setdefault(host, {})
        if not changed:
            if date in changed_dates:
                return True
            if len(idle) >= _DATES:
                idle.clear()
            idle[date] = idle.get(date, 0) + 1
            return False
        if len(changed_dates) >= _DATES:
            changed_dates.clear()
        changed_dates.add(date)
        echoed = min(float(idle.pop(date, 0)), counts[1])
        counts[1] -= echoed
        delta[1] -= echoed
        return False

    def take(self) -> list[tuple[object, ...]]:
        """The evidence gathered since the last take, ``(host, *increments)``, for
        ``write_hosts`` with the results it came from."""
        rows = [(host, *delta) for host, delta in sorted(self._delta.items())]
        self._delta.clear()
        return rows

    def restore(self, rows: list[tuple[object, ...]]) -> None:
        """Increments whose write failed: written again next time."""
        for host, *values in rows:
            delta = self._delta.setdefault(str(host), [0.0] * 4)
            for at, value in enumerate(values):
                delta[at] += float(value)  # type: ignore[arg-type]

    def written(self, totals: dict[str, list[float]]) -> None:
        """The stored totals a write left (every worker's evidence): the counts to
        judge by, plus what this store gathered since."""
        for host, stored in totals.items():
            delta = self._delta.get(host, [0.0] * 4)
            self._counts[host] = [a + b for a, b in zip(stored, delta, strict=True)]

    def read(self, database: Backend, hosts: set[str]) -> dict[str, list[float]]:
        """The stored counts of *hosts* not known yet (on the caller's thread and
        connection: a shared state reads them with the rows it claims)."""
        wanted = sorted(host for host in hosts if host and host not in self._counts)
        found = {host: [0.0] * 4 for host in wanted}
        if wanted:
            rows = database.execute(database.sql.host_counts, (json.dumps(wanted),))
            found.update((row[0], [float(v) for v in row[1:]]) for row in rows)
        if not self.priors_in_place:  # a shared state: the priors with the counts
            self._priors.update(self.read_priors(database, hosts))
        return found

    def learn(self, counts: dict[str, list[float]]) -> None:
        """Counts read by ``read``, where none are known yet."""
        for host, values in counts.items():
            self._counts.setdefault(host, values)


def _beyond_window(counts: list[float], min_evidence: int) -> bool:
    return counts[0] + counts[1] + counts[2] > _WINDOW * min_evidence


def write_hosts(
    db: Session,
    rows: list[tuple[Any, ...]],
    demoted_wait: float,
    min_evidence: int,
    trusted_wait: float | None = None,
    promoted: list[str] | None = None,
) -> dict[str, list[float]]:
    """Add hosts' evidence to the stored counts (inside the results' transaction, the
    hosts' rows locked in name order), then judge each host on the stored totals; a
    host whose dates lose their trust has its pages checked within *demoted_wait*.
    Returns the stored totals."""
    totals: dict[str, list[float]] = {}
    for host, *increments in sorted(rows, key=lambda row: str(row[0])):
        *stored, before = db.execute(db.sql.add_host_evidence, (host, *increments)).fetchone()
        counts = [max(0.0, float(value)) for value in stored]
        if _beyond_window(counts, min_evidence):
            counts = [value / 2 for value in counts]
        verdict = lastmod_verdict(counts[0], counts[1], counts[2], min_evidence)
        db.execute(db.sql.set_host_verdict, (*counts, verdict, host))
        totals[str(host)] = counts
        if before == TRUSTED and verdict != TRUSTED:
            logger.warning(
                "Sitemap dates of %s are no longer trusted (%s): its pages are "
                "checked within %.0f days of their last fetch",
                host,
                verdict,
                demoted_wait / 86_400,
            )
            db.execute(db.sql.demote, (demoted_wait, host))
        elif verdict == TRUSTED and before != TRUSTED and trusted_wait and promoted is not None:
            # Pages scheduled while the host was judged wait for their dates now,
            # not for the checks the schedule had planned before the trust: the
            # caller promotes them once this batch's own rows are written.
            promoted.append(str(host))
    return totals


def _same_day(lastmod: str, fetched: float) -> bool:
    if not lastmod.endswith("T00:00:00Z"):
        return False  # a date with a time: it can move for every edit
    day = datetime.fromtimestamp(fetched, timezone.utc).strftime("%Y-%m-%d")
    return lastmod.startswith(day)
