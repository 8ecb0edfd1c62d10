"""SQLite's statements of a run and its discovery (``runs.py``, ``lastmod.py``,
``queue.py``'s budget), by the names of ``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.schedule.rows import RUN_COUNTS

# Live rows and gone rows still listed: the queue's two index ranges.
_DUE = (
    "SELECT {columns} FROM pages WHERE seed = :seed AND gone = 0 AND next_check <= :now "
    "UNION ALL SELECT {columns} FROM pages "
    "WHERE seed = :seed AND gone = 1 AND missing_runs = 0 AND next_check <= :now"
)
_SEEN_AGAIN_SITEMAP = """coalesce(
            (SELECT c.sitemap_url FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url), sitemap_url)"""
_FEED_SITEMAP = """coalesce(sitemap_url,
            (SELECT c.sitemap_url FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url))"""


#: A feed's date newer than its page's last fetch: the page is due now. The date is
#: not kept (a feed drops its older items, and a date kept after its item fell off
#: would stand still while the page changes: taken for a date, it would earn the host
#: trust its dates do not deserve).
_FEED_DATE_DUE = """
        UPDATE pages SET next_check = min(next_check, :now)
        WHERE normalized_url IN (
            SELECT c.normalized_url FROM temp.chunk AS c
            JOIN pages AS p ON p.normalized_url = c.normalized_url
            WHERE c.lastmod IS NOT NULL AND NOT c.future AND p.last_fetched IS NOT NULL
              AND c.lastmod > strftime('%Y-%m-%dT%H:%M:%SZ', p.last_fetched, 'unixepoch'))
        """


def _apply_chunk(sitemap: str, feed: bool = False) -> tuple[str, ...]:
    kept = "NULL" if feed else "c.lastmod"  # a feed's dates are signals only
    return (
        # A feed's dates: due now where they are newer than the last fetch. A
        # sitemap's: rows whose lastmod moved, what that means decided once discovery
        # is over (Run.apply_lastmod), when waves can be told from edits.
        _FEED_DATE_DUE
        if feed
        else """
        INSERT OR REPLACE INTO temp.moves
        SELECT c.normalized_url, c.host, c.lastmod FROM temp.chunk AS c
        JOIN pages AS p ON p.normalized_url = c.normalized_url
        WHERE p.sitemap_lastmod IS NOT NULL AND c.lastmod IS NOT NULL
          AND p.sitemap_lastmod != c.lastmod AND NOT c.future
        """,
        # Rows seen again are no longer missing, with their date as listed. Driven by
        # the chunk's keys (IN), so each is one primary-key lookup, never a scan.
        f"""
        UPDATE pages SET
            last_seen = :now,
            seen_run = :run,
            missing_runs = 0,
            sitemap_lastmod = coalesce(
                (SELECT {kept} FROM temp.chunk AS c
                 WHERE c.normalized_url = pages.normalized_url AND NOT c.future),
                sitemap_lastmod)
        WHERE normalized_url IN (SELECT normalized_url FROM temp.chunk)
        """,
        # They belong to this seed and this sitemap now: written only where that
        # changes (both columns are indexed; rewriting equal values costs three
        # times the rest).
        f"""
        UPDATE pages SET
            seed = :seed,
            sitemap_url = {sitemap}
        WHERE normalized_url IN (
            SELECT c.normalized_url FROM temp.chunk AS c
            JOIN pages AS p ON p.normalized_url = c.normalized_url
            WHERE p.seed IS NOT :seed
               OR (c.sitemap_url IS NOT NULL AND p.sitemap_url IS NOT c.sitemap_url))
        """,
        # Then rows discovery has never seen: due now, default interval. (A row
        # another worker inserted meanwhile is left as it is.)
        f"""
        INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, next_check,
                           interval_s, sitemap_lastmod, sitemap_url, host, seen_run)
        SELECT c.normalized_url, c.url, :seed, :now, :now, 0, :interval, {kept},
               c.sitemap_url, c.host, :run
        FROM temp.chunk AS c
        WHERE NOT EXISTS (SELECT 1 FROM pages AS p WHERE p.normalized_url = c.normalized_url)
        ON CONFLICT (normalized_url) DO NOTHING
        """,
    )


_MOVES_OUTSIDE_WAVES = """
    SELECT m.normalized_url FROM temp.moves AS m
    WHERE NOT EXISTS (SELECT 1 FROM temp.waves AS w
                      WHERE w.host = m.host AND w.minute = substr(m.lastmod, 1, 16))"""


class DiscoverySQL:
    insert_run = "INSERT INTO runs (seed, started_at) VALUES (?, ?) RETURNING id"
    earlier_run = "SELECT 1 FROM runs WHERE seed = ? AND id < ? LIMIT 1"
    run_tables: tuple[str, ...] = (
        "CREATE TEMP TABLE IF NOT EXISTS chunk (normalized_url TEXT PRIMARY KEY, url TEXT, "
        "lastmod TEXT, sitemap_url TEXT, host TEXT, future INTEGER) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS moves ("
        "normalized_url TEXT PRIMARY KEY, host TEXT, lastmod TEXT) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS waves (host TEXT, minute TEXT, "
        "PRIMARY KEY (host, minute)) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS deaf (host TEXT PRIMARY KEY) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS unchanged (url TEXT PRIMARY KEY) WITHOUT ROWID",
        "CREATE TEMP TABLE IF NOT EXISTS missing (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID",
        "DELETE FROM temp.moves",
        "DELETE FROM temp.chunk",
        "DELETE FROM temp.unchanged",
        "DELETE FROM temp.missing",
    )
    count_future = (
        "INSERT INTO hosts (host, future_dates) VALUES (?, ?) ON CONFLICT (host) "
        "DO UPDATE SET future_dates = hosts.future_dates + excluded.future_dates"
    )
    add_sitemap = (
        "INSERT OR IGNORE INTO sitemaps (seed, url, digest, read_at, feed) "
        "VALUES (:seed, :url, '', :now, :feed)"
    )
    clear_chunk = "DELETE FROM temp.chunk"
    # Each a primary-key lookup, driven by the chunk (NULL seed: a row never seen).
    listed_before = (
        "SELECT p.seed, count(*) FROM temp.chunk AS c "
        "LEFT JOIN pages AS p ON p.normalized_url = c.normalized_url "
        "WHERE p.seen_run IS NOT :run GROUP BY p.seed"
    )
    # One statement, not a step per row: SQLite runs the whole chunk without the GIL
    # while discovery parses the next one.
    fill_chunk = (
        "INSERT INTO temp.chunk SELECT "
        + ", ".join(f"json_extract(value, '$[{column}]')" for column in range(6))
        + " FROM json_each(?)"
    )
    chunk_plan: tuple[str, ...] = ()  # its planner finds the chunk's rows by key
    lock_chunk_rows: str | None = None  # one writer at a time: the file's write lock
    apply_chunk = _apply_chunk(_SEEN_AGAIN_SITEMAP)
    #: A feed's chunk: as a sitemap's, but a row a sitemap lists stays attached to it.
    apply_feed_chunk = _apply_chunk(_FEED_SITEMAP, feed=True)
    apply_signal_chunk: tuple[str, ...] = (_FEED_DATE_DUE,)
    mark_seen_only = "UPDATE pages SET seen_run = ? WHERE normalized_url = ?"
    sitemap_digest = "SELECT digest FROM sitemaps WHERE seed = ? AND url = ?"
    add_unchanged = "INSERT OR IGNORE INTO temp.unchanged VALUES (?)"
    set_sitemap_validators = (
        "UPDATE sitemaps SET etag = ?, last_modified = ? WHERE seed = ? AND url = ?"
    )
    sitemap_conditions = (
        "SELECT etag, last_modified, settings FROM sitemaps WHERE seed = ? AND url = ?"
    )
    detach_from_sitemap = (
        "UPDATE pages SET sitemap_url = NULL WHERE sitemap_url = ? AND seen_run IS NOT ?"
    )
    sitemap_read = (
        "INSERT INTO sitemaps (seed, url, digest, read_at, etag, last_modified, "
        "settings, feed) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (seed, url) DO UPDATE SET digest = excluded.digest, "
        "read_at = excluded.read_at, etag = excluded.etag, "
        "last_modified = excluded.last_modified, settings = excluded.settings, "
        "feed = excluded.feed"
    )
    clear_missing = "DELETE FROM temp.missing"
    #: Driven by the sitemaps that were read whole and changed (through
    #: pages_sitemap), never a scan of the seed: an hourly run on a quiet site
    #: touches a few rows.
    find_missing = """
    INSERT OR IGNORE INTO temp.missing
    SELECT p.normalized_url FROM pages AS p INDEXED BY pages_sitemap
    WHERE p.sitemap_url IS NULL AND +p.seed = :seed
      AND p.seen_run IS NOT :run
    UNION ALL
    SELECT p.normalized_url FROM sitemaps AS m CROSS JOIN pages AS p INDEXED BY pages_sitemap
      ON p.sitemap_url = m.url
    WHERE m.seed = :seed AND +p.seed = :seed AND NOT m.feed
      AND NOT EXISTS (SELECT 1 FROM temp.unchanged AS u WHERE u.url = m.url)
      AND p.seen_run IS NOT :run
    """
    count_missing_due = (
        "SELECT count(*) FROM pages "
        "WHERE normalized_url IN (SELECT normalized_url FROM temp.missing) "
        "AND missing_runs + 1 = :n AND gone = 0"
    )
    # A gone row no longer listed is counted too: it stops being re-checked.
    mark_missing = (
        "UPDATE pages SET missing_runs = missing_runs + 1, next_check = CASE "
        "WHEN missing_runs + 1 = :n AND gone = 0 THEN min(next_check, :now) "
        "ELSE next_check END "
        "WHERE normalized_url IN (SELECT normalized_url FROM temp.missing)"
    )
    any_moves = "SELECT 1 FROM temp.moves LIMIT 1"
    #: Counts not given are None: those columns keep what they hold.
    finish_run = (
        "UPDATE runs SET "
        + "".join(f"{name} = coalesce(:{name}, {name}), " for name in RUN_COUNTS)
        + "finished_at = :now, discovery_complete = :complete, close_reason = :reason, "
        "listed = :listed, hidden = :hidden WHERE id = :id"
    )
    # The run's tokens so far, written with its results (a killed run's count).
    note_tokens = "UPDATE runs SET tokens_charged = max(tokens_charged, ?) WHERE id = ?"

    # -- lastmod.py ----------------------------------------------------------
    move_buckets = "SELECT host, substr(lastmod, 1, 16), count(*) FROM temp.moves GROUP BY 1, 2"
    host_sizes = (
        "SELECT host, count(*) FROM pages WHERE seed = ? "
        "AND host IN (SELECT value FROM json_each(?)) GROUP BY host"
    )
    # host_verdicts: shared_sql.py
    clear_waves = "DELETE FROM temp.waves"
    add_wave = "INSERT INTO temp.waves VALUES (?, ?)"
    clear_deaf = "DELETE FROM temp.deaf"
    add_deaf = "INSERT INTO temp.deaf VALUES (?)"
    count_wave = (
        "INSERT INTO hosts (host, waves) VALUES (?, 1) "
        "ON CONFLICT (host) DO UPDATE SET waves = hosts.waves + 1"
    )
    count_moves = "SELECT count(*) FROM temp.moves"
    #: Moves outside waves, on hosts whose dates are heard: due now.
    moves_due = (
        "UPDATE pages SET next_check = min(next_check, :now) WHERE normalized_url IN ("
        + _MOVES_OUTSIDE_WAVES
        + " AND m.host NOT IN (SELECT host FROM temp.deaf))"
    )
    #: ...and every move outside a wave is evidence for the host's verdict.
    moves_remembered = (
        "UPDATE pages SET lastmod_moved = 1 WHERE normalized_url IN (" + _MOVES_OUTSIDE_WAVES + ")"
    )
    clear_moves = "DELETE FROM temp.moves"
    seed_has_host = "SELECT 1 FROM pages WHERE seed = ? AND host = ? LIMIT 1"
    sampled_at = "SELECT sampled_at FROM hosts WHERE host = ?"
    set_sampled_at = "UPDATE hosts SET sampled_at = ? WHERE host = ?"
    count_waiting = (
        "SELECT count(*) FROM pages WHERE seed = ? AND host = ? AND gone = 0 AND next_check > ?"
    )
    sample_due = (
        "UPDATE pages SET next_check = :now, sampled = max(sampled, 1) WHERE id IN ("
        "SELECT id FROM pages WHERE seed = :seed AND host = :host AND gone = 0 "
        "AND next_check > :now ORDER BY (id * 2654435761 + :salt) % 4294967296 "
        "LIMIT :count)"
    )

    # -- queue.py's budget -----------------------------------------------------
    due_count = "SELECT count(*) FROM (" + _DUE.format(columns="next_check") + ") AS due"
    due_likeliest = (
        "SELECT normalized_url FROM ("
        + _DUE.format(
            columns="normalized_url, next_check, last_fetched, lastmod_moved, change_rate, "
            "interval_s"
        )
        + ") AS due ORDER BY (last_fetched IS NULL OR lastmod_moved = 1) DESC, "
        "coalesce(change_rate, :implied / interval_s) * (:now - coalesce(last_fetched, :now)) "
        "DESC, next_check, normalized_url LIMIT :limit"
    )
    due_oldest = (
        "SELECT normalized_url FROM ("
        + _DUE.format(columns="normalized_url, next_check")
        + ") AS due ORDER BY next_check, normalized_url LIMIT :limit"
    )
    budget_table = "CREATE TEMP TABLE IF NOT EXISTS budget (key TEXT PRIMARY KEY) WITHOUT ROWID"
    clear_budget = "DELETE FROM temp.budget"
    add_budget = "INSERT INTO temp.budget VALUES (?)"
    left_waiting = (
        "SELECT min(next_check) FROM ("
        + _DUE.format(columns="normalized_url, next_check")
        + ") AS due WHERE normalized_url NOT IN (SELECT key FROM temp.budget)"
    )
