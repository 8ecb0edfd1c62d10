"""What each run fetched, for the report (``scrapy increcrawl report``).

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
from typing import Any

from increcrawl_scrapy.rows import ALIAS_MARK, Outcome

#: A check of the page keyed by the last parameter, in this run (the page's id:
#: it stays when re-keying changes the key). The page's row is written first.
RECORD = (
    "INSERT INTO checks (run, page, at, status, outcome, kind) "
    "SELECT ?, id, ?, ?, ?, ? FROM pages WHERE normalized_url = ? "
    "ON CONFLICT (run, page) DO UPDATE SET at = excluded.at, status = excluded.status, "
    "outcome = excluded.outcome, kind = excluded.kind"
)
#: What a check's outcome says of a page whose fingerprint names its canonical page:
#: kept and scheduled, never reported (so never in a change set).
ALIAS = "alias"
#: The outcomes a change set lists.
CHANGES = (Outcome.NEW.value, Outcome.CHANGED.value, Outcome.GONE.value)

Check = tuple[int, float, int, str, "str | None", str]  # RECORD's parameters


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


def finish(database: Any, run_id: int, seed: str, history: RunHistory) -> None:
    """The run is over (its results written): its responses by kind go on its row,
    and the checks of the seed's runs older than the last ``keep_runs`` are dropped
    (at most one run's worth a run, once the history is full)."""
    statuses = json.dumps(dict(sorted(history.kinds.items())))
    with database.transaction() as db:
        db.execute("UPDATE runs SET statuses = ? WHERE id = ?", (statuses, run_id))
        oldest_dropped = db.execute(
            "SELECT id FROM runs WHERE seed = ? ORDER BY id DESC LIMIT 1 OFFSET ?",
            (seed, history.keep_runs),
        ).fetchone()
        if oldest_dropped is not None:
            db.execute(
                "DELETE FROM checks WHERE run IN (SELECT id FROM runs WHERE seed = ? AND id <= ?)",
                (seed, oldest_dropped[0]),
            )


def change_sets(db: Any, run_ids: list[int], limit: int) -> dict[int, list[dict[str, Any]]]:
    """The pages new, changed or gone in each of *run_ids* (at most *limit* a run,
    by time), with the page's id and URL."""
    found: dict[int, list[dict[str, Any]]] = {}
    marks = ", ".join("?" for _ in CHANGES)
    for run in run_ids:
        rows = db.execute(
            "SELECT c.page, p.url, c.at, c.outcome FROM checks AS c "
            "JOIN pages AS p ON p.id = c.page "
            f"WHERE c.run = ? AND c.outcome IN ({marks}) ORDER BY c.at, p.url LIMIT ?",
            (run, *CHANGES, limit),
        )
        found[run] = [dict(row) for row in rows]
    return found


def run_counts(db: Any, run_ids: list[int]) -> dict[int, int]:
    """How many checks each of *run_ids* kept (0: its history was dropped)."""
    counts: dict[int, int] = {}
    for run in run_ids:
        (counts[run],) = db.execute("SELECT count(*) FROM checks WHERE run = ?", (run,)).fetchone()
    return counts


def page_checks(db: Any, page_ids: list[int]) -> dict[int, list[list[Any]]]:
    """Each page's kept checks, oldest first: ``[run, at, status, outcome, kind]``."""
    found: dict[int, list[list[Any]]] = {page: [] for page in page_ids}
    for at in range(0, len(page_ids), 500):
        chunk = page_ids[at : at + 500]
        rows = db.execute(
            "SELECT page, run, at, status, outcome, kind FROM checks "
            f"WHERE page IN ({', '.join('?' for _ in chunk)}) ORDER BY page, at",
            chunk,
        )
        for row in rows:
            found[row[0]].append([row[1], row[2], row[3], row[4], row[5]])
    return found
