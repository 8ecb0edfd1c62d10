"""SQLite's statements of what each run fetched (``history.py``) and of what the
report reads of it (``reports.py``), by the names of
``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.state.history import CHANGES, REPORTED_PAGE

_CHANGES = ", ".join(f"'{outcome}'" for outcome in CHANGES)


class HistorySQL:
    #: The page's id, not its key: it stays when re-keying changes the key. The
    #: page's row is written first.
    record_check = (
        "INSERT INTO checks (run, page, at, status, outcome, kind) "
        "SELECT ?, id, ?, ?, ?, ? FROM pages WHERE normalized_url = ? "
        "ON CONFLICT (run, page) DO UPDATE SET at = excluded.at, status = excluded.status, "
        "outcome = excluded.outcome, kind = excluded.kind"
    )
    set_run_statuses = "UPDATE runs SET statuses = ? WHERE id = ?"
    oldest_run_dropped = "SELECT id FROM runs WHERE seed = ? ORDER BY id DESC LIMIT 1 OFFSET ?"
    drop_checks = "DELETE FROM checks WHERE run IN (SELECT id FROM runs WHERE seed = ? AND id <= ?)"
    run_check_count = "SELECT count(*) FROM checks WHERE run = ?"
    change_set = (
        "SELECT c.page, p.url, c.at, c.outcome FROM checks AS c "
        "JOIN pages AS p ON p.id = c.page "
        f"WHERE c.run = ? AND c.outcome IN ({_CHANGES}) ORDER BY c.at, p.url LIMIT ?"
    )
    page_checks = (
        "SELECT page, run, at, status, outcome, kind FROM checks "
        "WHERE page IN (SELECT value FROM json_each(?)) ORDER BY page, at"
    )
    pages_by_ids = (
        f"SELECT {', '.join(REPORTED_PAGE)} FROM pages WHERE id IN (SELECT value FROM json_each(?))"
    )
