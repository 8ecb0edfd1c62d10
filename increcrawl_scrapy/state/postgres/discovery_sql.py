"""PostgreSQL's statements of a run and its discovery (``runs.py``, ``lastmod.py``,
``queue.py``'s budget), by the names of ``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.schedule.rows import RUN_COUNTS

# Live rows and gone rows still listed: the queue's two index ranges.
_DUE = (
    "SELECT {columns} FROM pages WHERE seed = %(seed)s AND gone = 0 AND next_check <= %(now)s "
    "UNION ALL SELECT {columns} FROM pages "
    "WHERE seed = %(seed)s AND gone = 1 AND missing_runs = 0 AND next_check <= %(now)s"
)
_SEEN_AGAIN_SITEMAP = "coalesce(c.sitemap_url, p.sitemap_url)"
_FEED_SITEMAP = "coalesce(p.sitemap_url, c.sitemap_url)"


#: A feed's date newer than its page's last fetch: the page is due now. The date is
#: not kept (a feed drops its older items, and a date kept after its item fell off
#: would stand still while the page changes: taken for a date, it would earn the host
#: trust its dates do not deserve).
_FEED_DATE_DUE = """
        UPDATE pages AS p SET next_check = least(p.next_check, %(now)s)
        FROM pg_temp.chunk AS c
        WHERE p.id = c.id AND c.lastmod IS NOT NULL AND c.future = 0
          AND p.last_fetched IS NOT NULL
          AND c.lastmod > to_char(to_timestamp(p.last_fetched) AT TIME ZONE 'UTC',
                                  'YYYY-MM-DD"T"HH24:MI:SS"Z"')
        """


def _apply_chunk(sitemap: str, feed: bool = False) -> tuple[str, ...]:
    kept = "NULL" if feed else "c.lastmod"  # a feed's dates are signals only
    # The rows' old values were noted in the chunk as they were locked
    # (lock_chunk_rows): each row of pages is found once a chunk, by its id.
    return (
        # A feed's dates: due now where they are newer than the last fetch. A
        # sitemap's: rows whose lastmod moved, what that means decided once discovery
        # is over (Run.apply_lastmod), when waves can be told from edits.
        _FEED_DATE_DUE
        if feed
        else """
        INSERT INTO pg_temp.moves
        SELECT normalized_url, host, lastmod FROM pg_temp.chunk
        WHERE old_lastmod IS NOT NULL AND lastmod IS NOT NULL
          AND old_lastmod != lastmod AND future = 0
        ON CONFLICT (normalized_url) DO UPDATE SET host = excluded.host,
            lastmod = excluded.lastmod
        """,
        # Rows seen again are no longer missing, with their date as listed, and
        # belong to this seed and this sitemap now: one write a row (the indexed
        # columns mostly unchanged, so a HOT update, its indexes untouched).
        f"""
        UPDATE pages AS p SET last_seen = %(now)s, seen_run = %(run)s, missing_runs = 0,
            sitemap_lastmod = coalesce(CASE WHEN c.future = 0 THEN {kept} END,
                                       p.sitemap_lastmod),
            seed = %(seed)s, sitemap_url = {sitemap}
        FROM pg_temp.chunk AS c WHERE p.id = c.id
        """,
        # Then rows discovery has never seen: due now, default interval. (A row
        # another worker inserted meanwhile is left as it is.)
        f"""
        INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, next_check,
                           interval_s, sitemap_lastmod, sitemap_url, host, seen_run)
        SELECT c.normalized_url, c.url, %(seed)s, %(now)s, %(now)s, 0, %(interval)s,
               {kept}, c.sitemap_url, c.host, %(run)s
        FROM pg_temp.chunk AS c WHERE c.id IS NULL
        ON CONFLICT (normalized_url) DO NOTHING
        """,
    )


_MOVES_OUTSIDE_WAVES = """
    SELECT m.normalized_url FROM pg_temp.moves AS m
    WHERE NOT EXISTS (SELECT 1 FROM pg_temp.waves AS w
                      WHERE w.host = m.host AND w.minute = substr(m.lastmod, 1, 16))"""


class DiscoverySQL:
    insert_run = "INSERT INTO runs (seed, started_at) VALUES (%s, %s) RETURNING id"
    earlier_run = "SELECT 1 FROM runs WHERE seed = %s AND id < %s LIMIT 1"
    # Keys in the collation of the tables' own (no COLLATE): a join on another
    # collation cannot use their indexes, and scans the table for every chunk.
    run_tables: tuple[str, ...] = (
        # ...and the columns of its row in pages, once locked (NULL: no row yet).
        "CREATE TEMP TABLE IF NOT EXISTS chunk (normalized_url TEXT PRIMARY KEY, "
        "url TEXT, lastmod TEXT, sitemap_url TEXT, host TEXT, future INTEGER, "
        "id BIGINT, old_seed TEXT, old_run BIGINT, old_lastmod TEXT)",
        "CREATE TEMP TABLE IF NOT EXISTS moves (normalized_url TEXT PRIMARY KEY, host TEXT, "
        "lastmod TEXT)",
        "CREATE TEMP TABLE IF NOT EXISTS waves (host TEXT, minute TEXT, "
        "PRIMARY KEY (host, minute))",
        "CREATE TEMP TABLE IF NOT EXISTS deaf (host TEXT PRIMARY KEY)",
        "CREATE TEMP TABLE IF NOT EXISTS unchanged (url TEXT PRIMARY KEY)",
        "CREATE TEMP TABLE IF NOT EXISTS missing (normalized_url TEXT PRIMARY KEY)",
        "DELETE FROM pg_temp.moves",
        "DELETE FROM pg_temp.chunk",
        "DELETE FROM pg_temp.unchanged",
        "DELETE FROM pg_temp.missing",
    )
    count_future = (
        "INSERT INTO hosts (host, future_dates) VALUES (%s, %s) ON CONFLICT (host) "
        "DO UPDATE SET future_dates = hosts.future_dates + excluded.future_dates"
    )
    add_sitemap = (
        "INSERT INTO sitemaps (seed, url, digest, read_at, feed) "
        "VALUES (%(seed)s, %(url)s, '', %(now)s, %(feed)s) ON CONFLICT DO NOTHING"
    )
    # Emptied, not deleted from: no VACUUM reaches a temporary table, so each chunk's
    # dead rows would stay for every later chunk's scans to read again.
    clear_chunk = "TRUNCATE pg_temp.chunk"
    listed_before = (
        "SELECT old_seed, count(*) FROM pg_temp.chunk "
        "WHERE old_run IS DISTINCT FROM %(run)s GROUP BY old_seed"
    )
    # COPY (Session.fill): the chunk streamed in, not parsed from JSON.
    fill_chunk = (
        "COPY pg_temp.chunk (normalized_url, url, lastmod, sitemap_url, host, future) FROM STDIN"
    )
    # A chunk is small beside pages: its rows are found by index, never by a scan
    # of the whole table for each chunk (which the planner picks for a hash join).
    chunk_plan: tuple[str, ...] = (
        "SET LOCAL enable_hashjoin = off",
        "SET LOCAL enable_mergejoin = off",
    )
    # Rows locked in key order, as a results batch locks them (leases.fence): a
    # writer and discovery wait for each other, never in a circle. What the chunk's
    # statements need of each row is noted as it is locked.
    lock_chunk_rows: str | None = """
        UPDATE pg_temp.chunk AS c SET id = p.id, old_seed = p.seed, old_run = p.seen_run,
            old_lastmod = p.sitemap_lastmod
        FROM (SELECT id, normalized_url, seed, seen_run, sitemap_lastmod FROM pages
              WHERE normalized_url IN (SELECT normalized_url FROM pg_temp.chunk)
              ORDER BY normalized_url FOR UPDATE) AS p
        WHERE c.normalized_url = p.normalized_url
        """
    apply_chunk = _apply_chunk(_SEEN_AGAIN_SITEMAP)
    #: A feed's chunk: as a sitemap's, but a row a sitemap lists stays attached to it.
    apply_feed_chunk = _apply_chunk(_FEED_SITEMAP, feed=True)
    apply_signal_chunk: tuple[str, ...] = (_FEED_DATE_DUE,)
    mark_seen_only = "UPDATE pages SET seen_run = %s WHERE normalized_url = %s"
    sitemap_digest = "SELECT digest FROM sitemaps WHERE seed = %s AND url = %s"
    add_unchanged = "INSERT INTO pg_temp.unchanged VALUES (%s) ON CONFLICT DO NOTHING"
    set_sitemap_validators = (
        "UPDATE sitemaps SET etag = %s, last_modified = %s WHERE seed = %s AND url = %s"
    )
    sitemap_conditions = (
        "SELECT etag, last_modified, settings FROM sitemaps WHERE seed = %s AND url = %s"
    )
    detach_from_sitemap = (
        "UPDATE pages SET sitemap_url = NULL WHERE sitemap_url = %s "
        "AND seen_run IS DISTINCT FROM %s"
    )
    sitemap_read = (
        "INSERT INTO sitemaps (seed, url, digest, read_at, etag, last_modified, "
        "settings, feed) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (seed, url) DO UPDATE SET digest = excluded.digest, "
        "read_at = excluded.read_at, etag = excluded.etag, "
        "last_modified = excluded.last_modified, settings = excluded.settings, "
        "feed = excluded.feed"
    )
    clear_missing = "DELETE FROM pg_temp.missing"
    #: Driven by the sitemaps that were read whole and changed (through
    #: pages_sitemap), never a scan of the seed.
    find_missing = """
    INSERT INTO pg_temp.missing
    SELECT p.normalized_url FROM pages AS p
    WHERE p.sitemap_url IS NULL AND p.seed = %(seed)s
      AND p.seen_run IS DISTINCT FROM %(run)s
    UNION ALL
    SELECT p.normalized_url FROM sitemaps AS m JOIN pages AS p ON p.sitemap_url = m.url
    WHERE m.seed = %(seed)s AND p.seed = %(seed)s AND m.feed = 0
      AND NOT EXISTS (SELECT 1 FROM pg_temp.unchanged AS u WHERE u.url = m.url)
      AND p.seen_run IS DISTINCT FROM %(run)s
    ON CONFLICT DO NOTHING
    """
    count_missing_due = (
        "SELECT count(*) FROM pages "
        "WHERE normalized_url IN (SELECT normalized_url FROM pg_temp.missing) "
        "AND missing_runs + 1 = %(n)s AND gone = 0"
    )
    # A gone row no longer listed is counted too: it stops being re-checked.
    mark_missing = (
        "UPDATE pages SET missing_runs = missing_runs + 1, next_check = CASE "
        "WHEN missing_runs + 1 = %(n)s AND gone = 0 THEN LEAST(next_check, %(now)s) "
        "ELSE next_check END "
        "WHERE normalized_url IN (SELECT normalized_url FROM pg_temp.missing)"
    )
    any_moves = "SELECT 1 FROM pg_temp.moves LIMIT 1"
    #: Counts not given are None: those columns keep what they hold.
    finish_run = (
        "UPDATE runs SET "
        + "".join(f"{name} = coalesce(%({name})s, {name}), " for name in RUN_COUNTS)
        + "finished_at = %(now)s, discovery_complete = %(complete)s, close_reason = %(reason)s, "
        "listed = %(listed)s, hidden = %(hidden)s WHERE id = %(id)s"
    )
    # The run's tokens so far, written with its results (a killed run's count).
    note_tokens = "UPDATE runs SET tokens_charged = GREATEST(tokens_charged, %s) WHERE id = %s"

    # -- lastmod.py ----------------------------------------------------------
    move_buckets = "SELECT host, substr(lastmod, 1, 16), count(*) FROM pg_temp.moves GROUP BY 1, 2"
    host_sizes = (
        "SELECT host, count(*) FROM pages WHERE seed = %s "
        "AND host IN (SELECT jsonb_array_elements_text(%s::jsonb)) GROUP BY host"
    )
    # host_verdicts: shared_sql.py
    clear_waves = "DELETE FROM pg_temp.waves"
    add_wave = "INSERT INTO pg_temp.waves VALUES (%s, %s)"
    clear_deaf = "DELETE FROM pg_temp.deaf"
    add_deaf = "INSERT INTO pg_temp.deaf VALUES (%s)"
    count_wave = (
        "INSERT INTO hosts (host, waves) VALUES (%s, 1) "
        "ON CONFLICT (host) DO UPDATE SET waves = hosts.waves + 1"
    )
    count_moves = "SELECT count(*) FROM pg_temp.moves"
    #: Moves outside waves, on hosts whose dates are heard: due now.
    moves_due = (
        "UPDATE pages SET next_check = LEAST(next_check, %(now)s) WHERE normalized_url IN ("
        + _MOVES_OUTSIDE_WAVES
        + " AND m.host NOT IN (SELECT host FROM pg_temp.deaf))"
    )
    #: ...and every move outside a wave is evidence for the host's verdict.
    moves_remembered = (
        "UPDATE pages SET lastmod_moved = 1 WHERE normalized_url IN (" + _MOVES_OUTSIDE_WAVES + ")"
    )
    clear_moves = "DELETE FROM pg_temp.moves"
    seed_has_host = "SELECT 1 FROM pages WHERE seed = %s AND host = %s LIMIT 1"
    sampled_at = "SELECT sampled_at FROM hosts WHERE host = %s"
    set_sampled_at = "UPDATE hosts SET sampled_at = %s WHERE host = %s"
    count_waiting = (
        "SELECT count(*) FROM pages WHERE seed = %s AND host = %s AND gone = 0 AND next_check > %s"
    )
    sample_due = (
        "UPDATE pages SET next_check = %(now)s, sampled = GREATEST(sampled, 1) WHERE id IN ("
        "SELECT id FROM pages WHERE seed = %(seed)s AND host = %(host)s AND gone = 0 "
        "AND next_check > %(now)s ORDER BY (id * 2654435761 + %(salt)s) %% 4294967296 "
        "LIMIT %(count)s)"
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
        "coalesce(change_rate, %(implied)s / interval_s) "
        "* (%(now)s - coalesce(last_fetched, %(now)s)) DESC, "
        "next_check, normalized_url LIMIT %(limit)s"
    )
    due_oldest = (
        "SELECT normalized_url FROM ("
        + _DUE.format(columns="normalized_url, next_check")
        + ") AS due ORDER BY next_check, normalized_url LIMIT %(limit)s"
    )
    budget_table = "CREATE TEMP TABLE IF NOT EXISTS budget (key TEXT PRIMARY KEY)"
    clear_budget = "DELETE FROM pg_temp.budget"
    add_budget = "INSERT INTO pg_temp.budget VALUES (%s)"
    left_waiting = (
        "SELECT min(next_check) FROM ("
        + _DUE.format(columns="normalized_url, next_check")
        + ") AS due WHERE normalized_url NOT IN (SELECT key FROM pg_temp.budget)"
    )
