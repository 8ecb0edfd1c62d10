"""The operator's commands' door into the state: ``StateReader`` answers, one method
a question, what ``status``, ``report``, ``diff`` and ``noisy`` ask, with the
backend's named statements, never writing.

Opened from a location it can never write (SQLite's ``mode=ro``: it works on a
read-only file, and never creates one; PostgreSQL's read-only transactions), or
asked of an open store (``StateStore.reader()``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.state import spending
from increcrawl_scrapy.state.backend import Session
from increcrawl_scrapy.state.contents import KeptVersions, last_change
from increcrawl_scrapy.state.locations import is_postgres
from increcrawl_scrapy.state.postgres import database as postgres
from increcrawl_scrapy.state.sqlite import database as sqlite
from increcrawl_scrapy.state.sqlite.schema import SCHEMA_VERSION
from increcrawl_scrapy.state.upkeep import stored_normalize
from increcrawl_scrapy.urls import RULES_VERSION

if TYPE_CHECKING:
    from increcrawl_scrapy.schedule.token_plan import TokenFigures

Rows = list[dict[str, Any]]


class StateReader:
    """Read-only questions about one state, on one session."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._close: Callable[[], None] | None = None

    @classmethod
    def open(cls, location: str) -> StateReader:
        """A reader of the state at *location* that cannot write (StateError for a
        PostgreSQL state that is not there, or of another schema version)."""
        connection: sqlite.ReadOnly | postgres.Connection = (
            postgres.read_only(location) if is_postgres(location) else sqlite.ReadOnly(location)
        )
        reader = cls(connection)
        reader._close = connection.close
        return reader

    def close(self) -> None:
        """Close the connection :meth:`open` made (a session given is the giver's)."""
        if self._close is not None:
            self._close()
            self._close = None

    def _rows(self, statement: str, params: Any = ()) -> Rows:
        return [dict(row) for row in self.session.execute(statement, params)]

    # -- the state -----------------------------------------------------------

    def schema_behind(self) -> int | None:
        """A SQLite file's schema version if older than this package's (its runs'
        history not there yet), else None (PostgreSQL of another version is refused
        when opened)."""
        if not isinstance(self.session, sqlite.ReadOnly):
            return None
        found = self.session.schema_version()
        return found if found < SCHEMA_VERSION else None

    def seeds(self) -> list[str]:
        """Every seed with pages, in the statement's order."""
        return [row[0] for row in self.session.execute(self.session.sql.seeds)]

    def has_seed(self, seed: str) -> bool:
        """Whether *seed* has pages."""
        return self.session.execute(self.session.sql.seed_exists, (seed,)).fetchone() is not None

    def token_figures(self, at: float, reset_day: int, budget: int) -> TokenFigures:
        """The tokens of every seed's runs this week and this plan month."""
        return spending.token_figures(self.session, at, reset_day, budget)

    # -- one page --------------------------------------------------------------

    def key_of(self, url: str, normalize: Callable[[str], str]) -> str:
        """*url*'s row key, made as the state's keys were made (the settings stored
        with it), else by *normalize*; ValueError if it is not a page URL."""
        return stored_normalize(self.session, RULES_VERSION, normalize)(url)

    def page(self, key: str) -> tuple[int, str] | None:
        """The ``(id, seed)`` of the page keyed *key*, or None."""
        row = self.session.execute(self.session.sql.page_exists, (key,)).fetchone()
        return None if row is None else (row[0], row[1])

    def last_change(self, key: str) -> KeptVersions | None:
        """The kept texts of the page's last change, or None (none kept)."""
        return last_change(self.session, key)

    def noisy_pages(self, min_streak: int, seed: str | None = None) -> Rows:
        """Live pages reported changed on *min_streak* fetches in a row or more."""
        sql = self.session.sql
        if seed:
            return self._rows(sql.noisy_pages_of_seed, (min_streak, seed))
        return self._rows(sql.noisy_pages, (min_streak,))

    def pages_by_ids(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """The rows of *ids* (``history.REPORTED_PAGE``), in that order."""
        found = {
            row["id"]: row for row in self._rows(self.session.sql.pages_by_ids, (json.dumps(ids),))
        }
        return {page_id: found[page_id] for page_id in ids if page_id in found}

    # -- a seed, for ``status`` ------------------------------------------------

    def status_counts(self, seed: str, now: float, day: float) -> dict[str, Any]:
        """*seed*'s pages: live, gone, missing, due *now* and by *day*."""
        sql = self.session.sql
        return dict(
            self.session.execute(
                sql.status_counts, {"seed": seed, "now": now, "day": day}
            ).fetchone()
        )

    def fetched_intervals(self, seed: str) -> list[float]:
        """The intervals of *seed*'s live pages fetched at least once."""
        return [row[0] for row in self.session.execute(self.session.sql.fetched_intervals, (seed,))]

    def status_verdicts(self, seed: str) -> dict[str, str]:
        """The sitemap dates' verdict of each of *seed*'s hosts."""
        rows = self.session.execute(self.session.sql.status_verdicts, (seed,)).fetchall()
        return {host: verdict for host, verdict in rows}

    def status_runs(self, seed: str) -> Rows:
        """*seed*'s last runs, latest first, with the pages their rules hid (``hidden``:
        None on a state whose schema is older)."""
        runs = self._rows(self.session.sql.status_runs, (seed,))
        hidden = {}
        if self.schema_behind() is None:
            hidden = dict(self.session.execute(self.session.sql.runs_hidden, (seed,)).fetchall())
        return [{**run, "hidden": hidden.get(run["id"])} for run in runs]

    def unreached(self, seed: str, since: float, limit: int) -> list[str]:
        """*seed*'s live pages with state, due since *since* and not fetched since:
        the add-on's crawls no longer reach them (no page links to them any more)."""
        params = {"seed": seed, "since": since, "limit": limit}
        return [row[0] for row in self.session.execute(self.session.sql.unreached, params)]

    def unreached_checks(self, seed: str, since: float, aged: float, limit: int) -> list[str]:
        """*seed*'s live pages with state not fetched since *since*, due since then
        or last fetched before *aged* whatever their schedule, the ones whose checks
        failed last (``pages/unreached.py``)."""
        params = {"seed": seed, "since": since, "aged": aged, "limit": limit}
        sql = self.session.sql.unreached_checks
        return [row[0] for row in self.session.execute(sql, params)]

    # -- a seed, for the report --------------------------------------------------

    def report_counts(self, seed: str, at: float) -> dict[str, Any]:
        """*seed*'s pages: live, gone, due at *at*."""
        return dict(self.session.execute(self.session.sql.report_counts, (at, seed)).fetchone())

    def report_runs(self, seed: str, limit: int) -> Rows:
        """*seed*'s latest *limit* runs, oldest first."""
        return self._rows(self.session.sql.report_runs, (seed, limit))[::-1]

    def changing_pages(self, seed: str, limit: int) -> Rows:
        """*seed*'s *limit* pages that changed most often."""
        return self._rows(self.session.sql.changing_pages, (seed, limit))

    def report_verdicts(self, seed: str) -> Rows:
        """*seed*'s hosts' verdicts, with their evidence."""
        return self._rows(self.session.sql.report_verdicts, (seed,))

    # -- what each run fetched (``history.py``) ----------------------------------

    def run_check_counts(self, run_ids: Sequence[int]) -> dict[int, int]:
        """How many checks each of *run_ids* kept (0: its history was dropped)."""
        sql = self.session.sql.run_check_count
        return {run: self.session.execute(sql, (run,)).fetchone()[0] for run in run_ids}

    def change_sets(self, run_ids: Sequence[int], limit: int) -> dict[int, Rows]:
        """The pages new, changed or gone in each of *run_ids* (at most *limit* a run,
        by time), with the page's id and URL."""
        return {run: self._rows(self.session.sql.change_set, (run, limit)) for run in run_ids}

    def page_checks(self, page_ids: Sequence[int]) -> dict[int, list[list[Any]]]:
        """Each page's kept checks, oldest first: ``[run, at, status, outcome, kind]``."""
        found: dict[int, list[list[Any]]] = {page: [] for page in page_ids}
        for row in self.session.execute(self.session.sql.page_checks, (json.dumps(page_ids),)):
            found[row[0]].append([row[1], row[2], row[3], row[4], row[5]])
        return found
