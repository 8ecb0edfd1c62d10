"""What each run fetched, for the report (``scrapy increcrawl report``, which reads
it through ``reports.StateReader``).

A *check* per page a run fetched (its status, what the fetch meant, the kind of a
failure) is buffered with the page's result and written in the same transaction, so
a result never delivered leaves no check either. Checks are kept for the last
``INCRECRAWL_HISTORY_RUNS`` runs of each seed: a run's change set (which pages were
new, changed, gone) and a page's history come from them. Each run's responses by
kind (``200``, ``304``, ``404``, ``timeout``, ``HTTP 503``...) are counted as they
come and kept on the run's row for good (a few numbers a run).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING

from increcrawl_scrapy.schedule.rows import ALIAS_MARK, Outcome

if TYPE_CHECKING:
    from increcrawl_scrapy.state.backend import Backend

#: What a check's outcome says of a page whose fingerprint names its canonical page:
#: kept and scheduled, never reported (so never in a change set).
ALIAS = "alias"
#: The outcomes a change set lists.
CHANGES = (Outcome.NEW.value, Outcome.CHANGED.value, Outcome.GONE.value)

#: What the report shows of a page whose history it carries.
REPORTED_PAGE = (
    "id",
    "url",
    "normalized_url",
    "first_seen",
    "last_fetched",
    "last_changed",
    "change_count",
    "fetch_count",
    "error_count",
    "gone",
    "interval_s",
    "next_check",
    "last_status",
)

#: A check: run, at, status, outcome, kind, and the page's key (``record_check``'s
#: parameters).
Check = tuple[int, float, int, str, "str | None", str]


def kind_of(outcome: Outcome, status: int, error_kind: str | None) -> str:
    """The kind a response is counted under: its status (``200``, ``304``, ``404``),
    for a failure what failed (``timeout``, ``HTTP 503``, ``connection``...)."""
    if outcome is Outcome.ERROR:
        return error_kind or (f"HTTP {status}" if status else "failed")
    return str(status) if status else outcome.value


class RunHistory:
    """The current run's checks, until written, and its responses by kind."""

    def __init__(self, keep_runs: int = 100) -> None:
        self.keep_runs = keep_runs  # 0: no checks kept, only the counts by kind
        self.run: int | None = None
        self.kinds: Counter[str] = Counter()
        self._pending: dict[str, Check] = {}

    def begin(self, run_id: int) -> None:
        self.run = run_id
        self.kinds.clear()

    def add(
        self,
        key: str,
        at: float,
        status: int,
        outcome: Outcome,
        error_kind: str | None,
        content_hash: str | None,
    ) -> None:
        kind = kind_of(outcome, status, error_kind)
        self.kinds[kind] += 1
        if self.run is not None and self.keep_runs:
            alias = (content_hash or "").startswith(ALIAS_MARK)
            failure = kind if outcome is Outcome.ERROR else None
            said = ALIAS if alias else outcome.value
            self._pending[key] = (self.run, at, status, said, failure, key)

    def discard(self, key: str) -> None:
        self._pending.pop(key, None)

    def take(self, keys: list[str]) -> list[Check]:
        """The checks of *keys* (the results being written), out of the buffer."""
        return [self._pending.pop(key) for key in keys if key in self._pending]

    def restore(self, rows: list[Check]) -> None:
        """Checks whose write failed: back in the buffer, unless a later one came."""
        for row in rows:
            self._pending.setdefault(row[-1], row)


def finish(database: Backend, run_id: int, seed: str, history: RunHistory) -> None:
    """The run is over (its results written): its responses by kind go on its row,
    and the checks of the seed's runs older than the last ``keep_runs`` are dropped
    (at most one run's worth a run, once the history is full)."""
    statuses = json.dumps(dict(sorted(history.kinds.items())))
    with database.transaction() as db:
        db.execute(db.sql.set_run_statuses, (statuses, run_id))
        oldest_dropped = db.execute(db.sql.oldest_run_dropped, (seed, history.keep_runs)).fetchone()
        if oldest_dropped is not None:
            db.execute(db.sql.drop_checks, (seed, oldest_dropped[0]))
