"""SQLite's statements of the state's upkeep (settings, re-keying, fingerprints
taken again, the operator's edits) and of what the store and the commands report,
by the names of ``state/statements.py``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType

from increcrawl_scrapy.state.statements import FORGET_TARGETS, TARGETS

#: Rows that end on the same key: all but the most recent one go.
_MERGE_COLLISIONS = """
DELETE FROM pages WHERE id IN (
    SELECT id FROM (
        SELECT p.id, row_number() OVER (
            PARTITION BY coalesce(r.new_key, p.normalized_url)
            ORDER BY coalesce(p.last_fetched, 0) DESC, coalesce(p.last_seen, 0) DESC,
                     r.id IS NULL DESC, p.id
        ) AS rank
        FROM pages AS p LEFT JOIN temp.rekey AS r ON r.id = p.id
        WHERE p.id IN (SELECT id FROM temp.rekey)
           OR p.normalized_url IN (SELECT new_key FROM temp.rekey)
    ) AS ranked WHERE rank > 1
)
"""
_OLD = "old:"  # refingerprint.OLD
_UNANNOUNCED = (
    "FROM pages INDEXED BY pages_unannounced WHERE seed = ? AND unannounced >= 2 "
    "AND host NOT IN (SELECT host FROM hosts WHERE verdict = 'stale')"
)
_COUNTED = ", ".join(
    f"sum(CASE WHEN {condition} THEN 1 ELSE 0 END) AS {name}"
    for name, condition in (
        ("live", "gone = 0"),
        ("gone", "gone <> 0"),
        ("missing", "missing_runs > 0 AND gone = 0"),
        ("due_now", "next_check <= :now AND gone = 0"),
        ("due_24h", "next_check <= :day AND gone = 0"),
    )
)
_MARK_OLD = (
    f"UPDATE pages SET content_hash = '{_OLD}' || content_hash "
    f"WHERE content_hash IS NOT NULL AND content_hash NOT LIKE '{_OLD}%'"
)
_NOISY = (
    "SELECT normalized_url, url, change_streak, change_count, fetch_count FROM pages "
    "WHERE gone = 0 AND change_streak >= ?"
)
_WHERE = {"page": "WHERE normalized_url = ?", "seed": "WHERE seed = ?", "all": ""}


class UpkeepSQL:
    read_setting = "SELECT value FROM settings WHERE name = ?"
    write_setting = (
        "INSERT INTO settings (name, value) VALUES (?, ?) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value"
    )

    # -- upkeep.py: every row keyed again, kept texts moving with their rows ---
    # rekey_table: shared_sql.py
    clear_rekey = "DELETE FROM temp.rekey"
    # all_keys: shared_sql.py
    add_rekey = "INSERT INTO temp.rekey VALUES (?, ?)"
    rekey_index = "CREATE INDEX IF NOT EXISTS temp.rekey_new ON rekey (new_key)"
    merge_collisions = _MERGE_COLLISIONS
    # drop_orphan_contents: shared_sql.py
    # drop_orphan_checks: shared_sql.py
    # Through a key no row has (NUL and the id), so that swaps never collide.
    park_contents = (
        "UPDATE contents SET normalized_url = char(0) || (SELECT p.id FROM pages AS p "
        "WHERE p.normalized_url = contents.normalized_url) WHERE normalized_url IN "
        "(SELECT p.normalized_url FROM pages AS p WHERE p.id IN (SELECT id FROM temp.rekey))"
    )
    park_pages = (
        "UPDATE pages SET normalized_url = char(0) || id WHERE id IN (SELECT id FROM temp.rekey)"
    )
    rekey_pages = (
        "UPDATE pages SET normalized_url = "
        "(SELECT r.new_key FROM temp.rekey AS r WHERE r.id = pages.id) "
        "WHERE id IN (SELECT id FROM temp.rekey)"
    )
    rekey_contents = (
        "UPDATE contents SET normalized_url = "
        "(SELECT r.new_key FROM temp.rekey AS r WHERE char(0) || r.id = contents.normalized_url) "
        "WHERE normalized_url IN (SELECT char(0) || id FROM temp.rekey)"
    )
    drop_rekey = "DROP TABLE temp.rekey"

    # -- upkeep.py, fingerprints taken again ---------------------------------
    # kept_fingerprints: shared_sql.py
    set_fingerprint = "UPDATE pages SET content_hash = ? WHERE normalized_url = ?"
    # An item row's text is its own fields (INCRECRAWL_ITEM_KEY): no way of taking a
    # page's text touches it.
    mark_old = _MARK_OLD + " AND normalized_url NOT LIKE '%#item:%'"
    mark_old_without_content = (
        _MARK_OLD + " AND normalized_url NOT IN (SELECT normalized_url FROM contents)"
    )
    # Pages marked old are re-read in the run that starts (upkeep._mark_old).
    make_old_due = (
        f"UPDATE pages SET next_check = ? WHERE content_hash LIKE '{_OLD}%' AND gone = 0 "
        "AND next_check > ? AND normalized_url NOT LIKE '%#item:%'"
    )
    count_old = (
        f"SELECT count(*) FROM pages WHERE content_hash LIKE '{_OLD}%' AND gone = 0 "
        "AND normalized_url NOT LIKE '%#item:%'"
    )
    # readings.py: a project's own spider's pages, live or fetched since the run began.
    count_with_state = (
        "SELECT count(*) FROM pages WHERE seed = ? AND normalized_url NOT LIKE '%#item:%' "
        "AND (gone = 0 OR last_fetched >= ?)"
    )

    # -- edits.py: a page, a seed's pages, or all --------------------------------
    make_due: Mapping[str, str] = MappingProxyType(
        {
            target: "UPDATE pages SET next_check = 0, "
            f"missing_runs = iif(gone, 0, missing_runs) {_WHERE[target]}"
            for target in TARGETS
        }
    )
    reread_sitemaps: Mapping[str, str] = MappingProxyType(
        {
            target: "UPDATE sitemaps SET digest = '', etag = NULL, last_modified = NULL "
            f"WHERE url IN (SELECT sitemap_url FROM pages {_WHERE[target]})"
            for target in FORGET_TARGETS
        }
    )
    forget_seed_sitemaps = "DELETE FROM sitemaps WHERE seed = ?"
    forget_contents: Mapping[str, str] = MappingProxyType(
        {
            target: "DELETE FROM contents WHERE normalized_url IN "
            f"(SELECT normalized_url FROM pages {_WHERE[target]})"
            for target in FORGET_TARGETS
        }
    )
    forget_memories: Mapping[str, str] = MappingProxyType(
        {
            target: "DELETE FROM memories WHERE normalized_url IN "
            f"(SELECT normalized_url FROM pages {_WHERE[target]})"
            for target in FORGET_TARGETS
        }
    )
    forget_checks: Mapping[str, str] = MappingProxyType(
        {
            target: f"DELETE FROM checks WHERE page IN (SELECT id FROM pages {_WHERE[target]})"
            for target in FORGET_TARGETS
        }
    )
    forget_pages: Mapping[str, str] = MappingProxyType(
        {target: f"DELETE FROM pages {_WHERE[target]}" for target in FORGET_TARGETS}
    )

    # -- what the store reports ------------------------------------------------
    seed_hosts = (
        "SELECT * FROM hosts AS h WHERE EXISTS "
        "(SELECT 1 FROM pages AS p WHERE p.seed = ? AND p.host = h.host) ORDER BY host"
    )
    unannounced_count = f"SELECT count(*) {_UNANNOUNCED}"
    unannounced_urls = f"SELECT url {_UNANNOUNCED} ORDER BY url LIMIT ?"
    # all_runs: shared_sql.py
    seed_runs = "SELECT * FROM runs WHERE seed = ? ORDER BY id"
    discovery_lock: str | None = None  # one crawl a file: the crawl lock
    discovery_unlock: str | None = None

    def count_pages(self, columns: Sequence[str], seed: bool) -> str:
        """How many rows have these *columns*' values (each may be NULL)."""
        clauses = [f"{name} IS ?" for name in columns] + (["seed = ?"] if seed else [])
        return "SELECT count(*) FROM pages" + (" WHERE " + " AND ".join(clauses) if clauses else "")

    # -- the commands' reports, read by reports.StateReader -----------------------
    # seeds: shared_sql.py
    status_counts = f"SELECT count(*) AS pages, {_COUNTED} FROM pages WHERE seed = :seed"
    fetched_intervals = (
        "SELECT interval_s FROM pages WHERE seed = ? AND gone = 0 AND last_fetched IS NOT NULL"
    )
    status_verdicts = (
        "SELECT host, verdict FROM hosts WHERE host IN "
        "(SELECT DISTINCT host FROM pages WHERE seed = ?) ORDER BY host"
    )
    status_runs = (
        "SELECT id, started_at, finished_at, discovered, due, new, changed, unchanged, "
        "gone, errors, api_requests, tokens_charged, discovery_complete, close_reason, listed, "
        "new + changed + unchanged + gone + errors AS fetched "
        "FROM runs WHERE seed = ? ORDER BY id DESC LIMIT 5"
    )
    # Schema 10 (a state of 9, no crawl since, has no such column: status still reads).
    runs_hidden = "SELECT id, hidden FROM runs WHERE seed = ? ORDER BY id DESC LIMIT 5"
    unreached = (
        "SELECT url FROM pages WHERE seed = :seed AND gone = 0 AND next_check <= :since "
        "AND fetch_count > 0 AND coalesce(last_fetched, 0) < :since "
        "ORDER BY next_check, id LIMIT :limit"
    )
    # The add-on's checks (pages/unreached.py): due, or not fetched for long whatever
    # their schedule; failed checks (a site failure each) behind the others.
    unreached_checks = (
        "SELECT url FROM pages WHERE seed = :seed AND gone = 0 AND fetch_count > 0 "
        "AND coalesce(last_fetched, 0) < :since "
        "AND (next_check <= :since OR coalesce(last_fetched, 0) < :aged) "
        "ORDER BY error_streak, next_check, id LIMIT :limit"
    )
    report_counts = (
        "SELECT count(*) AS pages, "
        "coalesce(sum(CASE WHEN gone = 0 THEN 1 ELSE 0 END), 0) AS live, "
        "coalesce(sum(CASE WHEN gone <> 0 THEN 1 ELSE 0 END), 0) AS gone, "
        "coalesce(sum(CASE WHEN next_check <= ? AND gone = 0 THEN 1 ELSE 0 END), 0) AS due_now "
        "FROM pages WHERE seed = ?"
    )
    report_runs = (
        "SELECT id, started_at, finished_at, due, new, changed, unchanged, gone, errors, "
        "new + changed + unchanged + gone + errors AS fetched, listed, api_requests, "
        "tokens_charged, discovery_complete, close_reason, statuses, hidden "
        "FROM runs WHERE seed = ? ORDER BY id DESC LIMIT ?"
    )
    spending_runs = (
        "SELECT started_at, tokens_charged FROM runs WHERE started_at >= ? ORDER BY started_at"
    )
    recent_run_starts = "SELECT started_at FROM runs ORDER BY id DESC LIMIT ?"
    changing_pages = (
        "SELECT id, url, change_count, fetch_count, last_changed, interval_s FROM pages "
        "WHERE seed = ? AND change_count > 0 "
        "ORDER BY change_count DESC, fetch_count, url LIMIT ?"
    )
    report_verdicts = (
        "SELECT host, verdict, moved_changed, moved_unchanged, unmoved_changed, waves "
        "FROM hosts WHERE host IN (SELECT DISTINCT host FROM pages WHERE seed = ?) "
        "ORDER BY host"
    )
    page_exists = "SELECT id, seed FROM pages WHERE normalized_url = ?"
    seed_exists = "SELECT 1 FROM pages WHERE seed = ? LIMIT 1"
    noisy_pages = _NOISY + " ORDER BY change_streak DESC, url"
    noisy_pages_of_seed = _NOISY + " AND seed = ? ORDER BY change_streak DESC, url"
