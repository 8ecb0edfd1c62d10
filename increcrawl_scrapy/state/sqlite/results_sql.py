"""SQLite's statements of pages and their results (``results.py``, ``writes.py``,
``queue.py``, ``hosts.py``, kept contents and memories), by the names of
``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.schedule.estimator import OUTLIER_SIGMAS
from increcrawl_scrapy.schedule.rows import RESULT_COLUMNS
from increcrawl_scrapy.state.pages import RESULT_INSERT, SELECT_PAGE

HOST_COUNTS = ("moved_changed", "moved_unchanged", "unmoved_changed", "unmoved_unchanged")

#: The queue's stored order is (next_check, id): the order of the queue index
#: (seed, gone, next_check), whose last column is the rowid. Chunks are read by keyset
#: from where the last one ended, each part an index range that starts where it
#: should (rows due at the same time, as on a first run, are never skipped one by
#: one nor sorted): live rows, and gone rows still listed (their slow re-check).
_DUE_AFTER = (
    " UNION ALL ".join(
        f"SELECT id, {SELECT_PAGE} FROM pages WHERE seed = :seed AND gone = {gone} AND {after}"
        + (" AND missing_runs = 0" if gone else "")
        for gone in (0, 1)
        for after in (
            "next_check = :check AND id > :id",
            "next_check > :check AND next_check <= :now",
        )
    )
    + " ORDER BY next_check, id LIMIT :limit"
)


class ResultSQL:
    page_by_key = f"SELECT {SELECT_PAGE} FROM pages WHERE normalized_url = ?"
    #: The rows of a JSON array of keys, in one statement.
    pages_by_keys = (
        f"SELECT {SELECT_PAGE} FROM pages WHERE normalized_url IN (SELECT value FROM json_each(?))"
    )
    due_after = _DUE_AFTER
    seed_of_page = "SELECT seed FROM pages WHERE normalized_url = ?"
    #: A row not in the table when its result was recorded; another store may have
    #: inserted it since (two workers recording one new URL): then it is an update.
    insert_result = (
        f"INSERT INTO pages ({', '.join(RESULT_INSERT)}) "
        f"VALUES ({', '.join('?' for _ in RESULT_INSERT)}) "
        "ON CONFLICT (normalized_url) DO UPDATE SET "
        + ", ".join(f"{c} = excluded.{c}" for c in RESULT_COLUMNS)
    )
    update_result = (
        "UPDATE pages SET "
        + ", ".join(f"{c} = ?" for c in RESULT_COLUMNS)
        + " WHERE normalized_url = ?"
    )
    # A first text is inserted; a change moves the stored text to ``previous``; an
    # unchanged fetch writes only where nothing was kept yet (kept content turned on
    # for a page already known).
    keep_content = (
        "INSERT INTO contents (normalized_url, text, previous, changed_at) "
        "VALUES (?, ?, NULL, ?) "
        "ON CONFLICT (normalized_url) DO UPDATE SET previous = contents.text, "
        "text = excluded.text, changed_at = excluded.changed_at WHERE ? = 1"
    )
    last_change = "SELECT previous, text, changed_at FROM contents WHERE normalized_url = ?"
    remember = (
        "INSERT INTO memories (normalized_url, body) VALUES (?, ?) "
        "ON CONFLICT (normalized_url) DO UPDATE SET body = excluded.body"
    )
    read_memory = "SELECT body FROM memories WHERE normalized_url = ?"
    item_rows = (
        "SELECT normalized_url, last_fetched, content_hash FROM pages "
        "WHERE normalized_url >= ? AND normalized_url < ? "
        "AND normalized_url LIKE '%#item:%'"
    )
    forget_memory = "DELETE FROM memories WHERE normalized_url = ?"
    held_items = (
        "SELECT normalized_url, body FROM memories WHERE normalized_url >= ? AND normalized_url < ?"
    )
    #: The stored counts of a JSON array of hosts.
    host_counts = (
        f"SELECT host, {', '.join(HOST_COUNTS)} FROM hosts "
        "WHERE host IN (SELECT value FROM json_each(?))"
    )
    #: Per host of a JSON array, its fetched pages' totals for its prior of change
    #: rates (``estimator.host_prior``): pages, changes seen, time observed, and
    #: the sum of changes² over time observed; then the same of its pages less its
    #: fast few (``estimator.OUTLIER_SIGMAS`` above the host's mean rate).
    host_rates = (
        "WITH p AS (SELECT host, change_count AS k, last_fetched - first_seen AS t "
        "FROM pages WHERE host IN (SELECT value FROM json_each(?)) AND gone = 0 "
        "AND fetch_count >= 2 AND last_fetched > first_seen "
        "AND normalized_url NOT LIKE '%#item:%'), "
        "m AS (SELECT host, sum(k) * 1.0 / sum(t) AS rate FROM p GROUP BY host), "
        "b AS (SELECT p.host, k, t, CASE WHEN k - rate * t - 1 <= 0 OR "
        "(k - rate * t - 1) * (k - rate * t - 1) <= "
        f"{OUTLIER_SIGMAS**2} * rate * t THEN 1 ELSE 0 END AS body "
        "FROM p JOIN m ON m.host = p.host) "
        "SELECT host, count(*), sum(k), sum(t), sum(k * k / t), sum(body), "
        "sum(body * k), sum(body * t), sum(body * k * k / t) FROM b GROUP BY host"
    )
    #: The checks planned per coming day (``schedule/leveling.py``): day k holds
    #: those due in the k-th day after the first parameter, up to the second.
    planned_days = (
        "SELECT CAST(x AS INTEGER) + (x > CAST(x AS INTEGER)), count(*) "
        "FROM (SELECT (next_check - ?) / 86400.0 AS x "
        "FROM pages WHERE gone = 0 AND next_check > ? AND next_check <= ?) "
        "GROUP BY 1"
    )
    #: INCRECRAWL_MAX_STALENESS: no fetched page waits longer after its last fetch.
    bound_staleness = (
        "UPDATE pages SET next_check = last_fetched + ? WHERE gone = 0 "
        "AND last_fetched IS NOT NULL AND next_check > last_fetched + ? "
        "AND normalized_url NOT LIKE '%#item:%'"
    )
    add_host_evidence = (
        f"INSERT INTO hosts (host, {', '.join(HOST_COUNTS)}, verdict) "
        "VALUES (?, ?, ?, ?, ?, 'unknown') ON CONFLICT (host) DO UPDATE SET "
        + ", ".join(f"{c} = hosts.{c} + excluded.{c}" for c in HOST_COUNTS)
        + f" RETURNING {', '.join(HOST_COUNTS)}, verdict"
    )
    set_host_verdict = (
        f"UPDATE hosts SET {', '.join(f'{c} = ?' for c in HOST_COUNTS)}, verdict = ? WHERE host = ?"
    )
    #: A demoted host's pages: checked within the wait after their last fetch.
    demote = (
        "UPDATE pages SET next_check = min(next_check, "
        "coalesce(last_fetched, first_seen) + ?) WHERE host = ? AND gone = 0"
    )
    #: A host whose dates earn trust: its fetched pages whose dates stand still (and
    #: hold no change their date missed) wait for them.
    promote = (
        "UPDATE pages SET next_check = max(next_check, last_fetched + ?) "
        "WHERE host = ? AND gone = 0 AND last_fetched IS NOT NULL "
        "AND sitemap_lastmod IS NOT NULL AND lastmod_moved = 0 AND unannounced = 0"
    )
