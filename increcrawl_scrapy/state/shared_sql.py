"""The statements both backends say in the same words, written once: SQLite's and
PostgreSQL's statement classes (``sqlite/statements.py``, ``postgres/statements.py``)
take them from ``SharedSQL``. Every other statement differs at least in how it
names its parameters (``?`` and ``%s``), and stays in each backend's files."""

from __future__ import annotations


class SharedSQL:
    # -- upkeep.py: every row keyed again (the steps between: each backend's) -----
    # Plain CREATE TEMP TABLE: each backend finds it under its own temporary schema.
    rekey_table = "CREATE TEMP TABLE IF NOT EXISTS rekey (id INTEGER PRIMARY KEY, new_key TEXT)"
    all_keys = "SELECT id, normalized_url, url FROM pages"
    # The kept texts of rows merged away go with them...
    drop_orphan_contents = (
        "DELETE FROM contents WHERE NOT EXISTS "
        "(SELECT 1 FROM pages AS p WHERE p.normalized_url = contents.normalized_url)"
    )
    # ...and so do their checks (the report's history), kept by the row's id.
    drop_orphan_checks = (
        "DELETE FROM checks WHERE NOT EXISTS (SELECT 1 FROM pages AS p WHERE p.id = checks.page)"
    )

    # -- upkeep.py, fingerprints taken again -------------------------------------
    kept_fingerprints = (
        "SELECT c.normalized_url, c.text, p.content_hash FROM contents AS c "
        "JOIN pages AS p ON p.normalized_url = c.normalized_url "
        "WHERE p.content_hash IS NOT NULL"
    )

    # -- lastmod.py, the store's and the commands' readings -----------------------
    host_verdicts = "SELECT host, verdict FROM hosts"
    all_runs = "SELECT * FROM runs ORDER BY id"
    seeds = "SELECT DISTINCT seed FROM pages ORDER BY seed"
