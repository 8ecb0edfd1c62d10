"""The state database's schema: forward migrations, one statement per step.

Migration ``i`` takes ``PRAGMA user_version`` from ``i`` to ``i + 1``. A new
version appends a migration; a released one never changes.
"""

from __future__ import annotations

#: "ICCR": marks a file as an increcrawl state database.
APPLICATION_ID = 0x49434352

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: pages and runs.
    (
        """
        CREATE TABLE pages (
            id              INTEGER PRIMARY KEY,  -- rows append in discovery order
            normalized_url  TEXT NOT NULL UNIQUE,
            url             TEXT NOT NULL,
            seed            TEXT NOT NULL,
            first_seen      REAL NOT NULL,
            last_seen       REAL,
            last_fetched    REAL,
            next_check      REAL NOT NULL DEFAULT 0,
            interval_s      REAL NOT NULL,
            content_hash    TEXT,
            etag            TEXT,
            last_modified   TEXT,
            sitemap_lastmod TEXT,
            missing_runs    INTEGER NOT NULL DEFAULT 0,
            gone            INTEGER NOT NULL DEFAULT 0,
            last_status     INTEGER,
            last_changed    REAL,
            change_count    INTEGER NOT NULL DEFAULT 0,
            fetch_count     INTEGER NOT NULL DEFAULT 0,
            error_count     INTEGER NOT NULL DEFAULT 0
        )
        """,
        """
        CREATE TABLE runs (
            id                 INTEGER PRIMARY KEY,
            seed               TEXT NOT NULL,
            started_at         REAL NOT NULL,
            finished_at        REAL,
            discovered         INTEGER NOT NULL DEFAULT 0,
            new                INTEGER NOT NULL DEFAULT 0,
            changed            INTEGER NOT NULL DEFAULT 0,
            unchanged          INTEGER NOT NULL DEFAULT 0,
            gone               INTEGER NOT NULL DEFAULT 0,
            errors             INTEGER NOT NULL DEFAULT 0,
            api_requests       INTEGER NOT NULL DEFAULT 0,
            tokens_charged     INTEGER NOT NULL DEFAULT 0,
            discovery_complete INTEGER
        )
        """,
    ),
    # 2: the child sitemap that lists a row, digests of sitemaps read whole (an
    # identical one is not read again), the queue index, the run's due count and
    # close reason.
    (
        "ALTER TABLE pages ADD COLUMN sitemap_url TEXT",
        "CREATE INDEX pages_queue ON pages (seed, gone, next_check)",
        "CREATE INDEX pages_sitemap ON pages (sitemap_url)",
        """
        CREATE TABLE sitemaps (
            seed    TEXT NOT NULL,
            url     TEXT NOT NULL,
            digest  TEXT NOT NULL,
            read_at REAL NOT NULL,
            PRIMARY KEY (seed, url)
        ) WITHOUT ROWID
        """,
        "ALTER TABLE runs ADD COLUMN due INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN close_reason TEXT",
    ),
    # 3: consecutive site errors (they back off), the URL a redirect ended on, and
    # the settings the stored keys were made under (normalization).
    (
        "ALTER TABLE pages ADD COLUMN error_streak INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE pages ADD COLUMN final_url TEXT",
        """
        CREATE TABLE settings (
            name  TEXT PRIMARY KEY,
            value TEXT NOT NULL
        ) WITHOUT ROWID
        """,
    ),
    # 4: what the learned policy needs: each page's change history (the
    # estimator's bounded statistic), whether its lastmod moved since its last
    # fetch, its host; and per host, the evidence about its sitemap dates.
    (
        "ALTER TABLE pages ADD COLUMN change_history TEXT",
        "ALTER TABLE pages ADD COLUMN unchanged_time REAL NOT NULL DEFAULT 0",
        "ALTER TABLE pages ADD COLUMN observations REAL NOT NULL DEFAULT 0",
        "ALTER TABLE pages ADD COLUMN lastmod_moved INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE pages ADD COLUMN host TEXT",
        # scheme://HOST[:port]/... -> HOST[:port]: normalized URLs always have a path.
        """
        UPDATE pages SET host = substr(
            substr(normalized_url, instr(normalized_url, '://') + 3), 1,
            instr(substr(normalized_url, instr(normalized_url, '://') + 3), '/') - 1)
        """,
        """
        CREATE TABLE hosts (
            host              TEXT PRIMARY KEY,
            moved_changed     REAL NOT NULL DEFAULT 0,
            moved_unchanged   REAL NOT NULL DEFAULT 0,
            unmoved_changed   REAL NOT NULL DEFAULT 0,
            unmoved_unchanged REAL NOT NULL DEFAULT 0,
            waves             INTEGER NOT NULL DEFAULT 0,
            future_dates      INTEGER NOT NULL DEFAULT 0,
            verdict           TEXT NOT NULL DEFAULT 'unknown',
            sampled_at        REAL
        ) WITHOUT ROWID
        """,
    ),
    # 5: the change rate the policy estimated at each page's last fetch (the budget
    # orders due pages by the chance that they changed since), changes in a row its
    # sitemap date did not announce (noise, listed for the operator); each sitemap's
    # validators, and the settings they were read under (conditional requests).
    (
        "ALTER TABLE pages ADD COLUMN change_rate REAL",
        "ALTER TABLE pages ADD COLUMN unannounced INTEGER NOT NULL DEFAULT 0",
        "CREATE INDEX pages_unannounced ON pages (seed) WHERE unannounced >= 2",
        "ALTER TABLE sitemaps ADD COLUMN etag TEXT",
        "ALTER TABLE sitemaps ADD COLUMN last_modified TEXT",
        "ALTER TABLE sitemaps ADD COLUMN settings TEXT",
    ),
    # 6: for the operator: changes in a row (noisy pages), the live pages a run
    # ended with (requests saved against fetching them all), and the text of each
    # page before and after its last change (INCRECRAWL_KEEP_CONTENT), compressed;
    # which sources are feeds.
    (
        "ALTER TABLE pages ADD COLUMN change_streak INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN listed INTEGER",
        # A feed lists only its latest items: its rows never count as missing.
        "ALTER TABLE sitemaps ADD COLUMN feed INTEGER NOT NULL DEFAULT 0",
        """
        CREATE TABLE contents (
            normalized_url TEXT PRIMARY KEY,
            text           BLOB NOT NULL,
            previous       BLOB,
            changed_at     REAL NOT NULL
        ) WITHOUT ROWID
        """,
    ),
    # 7: the run that last saw each row in its sitemaps (rows not seen by a complete
    # discovery are missing): kept on the row, not in a per-run table in memory that
    # grows with the site.
    ("ALTER TABLE pages ADD COLUMN seen_run INTEGER",),
    # 8: what a page's last fetch leaves for the next (state/memories.py): its items'
    # prints, matched against the next version's, and its outgoing requests,
    # replayed when the page is skipped.
    (
        """
        CREATE TABLE memories (
            normalized_url TEXT PRIMARY KEY,
            body           BLOB NOT NULL
        ) WITHOUT ROWID
        """,
    ),
    # 9: what each run fetched (state/history.py), for the report: a check per page
    # (status, outcome, the kind of a failure), kept for the last
    # INCRECRAWL_HISTORY_RUNS runs of each seed; and each run's responses by kind.
    (
        """
        CREATE TABLE checks (
            run     INTEGER NOT NULL,
            page    INTEGER NOT NULL,  -- pages.id: it stays when a key is re-made
            at      REAL NOT NULL,
            status  INTEGER NOT NULL,
            outcome TEXT NOT NULL,
            kind    TEXT,
            PRIMARY KEY (run, page)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX checks_page ON checks (page)",
        "ALTER TABLE runs ADD COLUMN statuses TEXT",
    ),
    # 10: the rows a trusted host's sample made due (their change is evidence at
    # once); per run and host, the pages the rules took out of comparison.
    (
        "ALTER TABLE pages ADD COLUMN sampled INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN hidden TEXT",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)
