"""Keys are normalized URLs: when the normalization settings change, rows are
re-keyed under the new rules, so no URL is ever split across two rows."""

from __future__ import annotations

import functools
import json
import logging
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any

from increcrawl_scrapy.rows import ITEM_MARK, RekeyResult
from increcrawl_scrapy.state.database import Database

logger = logging.getLogger(__name__)

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


def stored_normalize(
    database: Database, rules: object, normalize: Callable[[str], str]
) -> Callable[[str], str]:
    """How the stored keys were made: ``normalize_url`` under the stored settings, if
    they were recorded under these *rules* (``urls.RULES_VERSION``), else *normalize*.
    The operator's commands key URLs by it, never re-keying the state with their own
    shell's settings (a crawl does that, with its project's)."""
    from increcrawl_scrapy.urls import normalize_url

    row = database.execute("SELECT value FROM settings WHERE name = 'normalization'").fetchone()
    stored = json.loads(row["value"]) if row is not None else {}
    if stored.pop("rules", None) != rules:
        return normalize
    options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
    return functools.partial(normalize_url, **options)


def check_normalization(
    database: Database, settings: Mapping[str, Any], normalize: Callable[[str], str]
) -> RekeyResult:
    """Store *settings*; if the stored ones differ, re-key every row first (one
    transaction). A database that never recorded them takes them as they are."""
    wanted = json.dumps(dict(settings), sort_keys=True)
    row = database.execute("SELECT value FROM settings WHERE name = 'normalization'").fetchone()
    if row is not None and row["value"] == wanted:
        return RekeyResult(0, 0)
    with database.transaction() as db:
        result = RekeyResult(0, 0) if row is None else _rekey(db, normalize)
        db.execute(
            "INSERT INTO settings (name, value) VALUES ('normalization', ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (wanted,),
        )
    if result.rekeyed:
        logger.warning(
            "URL normalization settings changed (%s): %d rows re-keyed, %d merged "
            "into the row of the same URL under the new rules",
            wanted,
            result.rekeyed,
            result.merged,
        )
    return result


def _rekey(db: sqlite3.Connection, normalize: Callable[[str], str]) -> RekeyResult:
    """Re-key every row with *normalize*; where two rows meet, the one fetched (then
    seen) most recently stays. Kept texts move with their rows (those of rows merged
    away go with them)."""
    db.execute("CREATE TEMP TABLE IF NOT EXISTS rekey (id INTEGER PRIMARY KEY, new_key TEXT)")
    db.execute("DELETE FROM temp.rekey")
    moving: list[tuple[int, str]] = []
    for row_id, key, url in db.execute("SELECT id, normalized_url, url FROM pages").fetchall():
        try:
            new_key = normalize(url)
        except ValueError:
            continue  # not a URL under the new rules either: keep its key
        mark = key.find(ITEM_MARK)
        if mark >= 0:  # an item row: its page's key moves, the item's own part stays
            new_key += key[mark:]
        if new_key != key:
            moving.append((row_id, new_key))
    db.executemany("INSERT INTO temp.rekey VALUES (?, ?)", moving)
    db.execute("CREATE INDEX IF NOT EXISTS temp.rekey_new ON rekey (new_key)")
    merged = db.execute(_MERGE_COLLISIONS).rowcount
    # Texts of the rows merged away go; those of moving rows take the rows' way.
    db.execute(
        "DELETE FROM contents WHERE NOT EXISTS "
        "(SELECT 1 FROM pages AS p WHERE p.normalized_url = contents.normalized_url)"
    )
    db.execute(
        "UPDATE contents SET normalized_url = char(0) || (SELECT p.id FROM pages AS p "
        "WHERE p.normalized_url = contents.normalized_url) WHERE normalized_url IN "
        "(SELECT p.normalized_url FROM pages AS p WHERE p.id IN (SELECT id FROM temp.rekey))"
    )
    # Through a key no row has, so that swaps never collide on the way.
    db.execute(
        "UPDATE pages SET normalized_url = char(0) || id WHERE id IN (SELECT id FROM temp.rekey)"
    )
    db.execute(
        "UPDATE pages SET normalized_url = "
        "(SELECT r.new_key FROM temp.rekey AS r WHERE r.id = pages.id) "
        "WHERE id IN (SELECT id FROM temp.rekey)"
    )
    db.execute(
        "UPDATE contents SET normalized_url = "
        "(SELECT r.new_key FROM temp.rekey AS r WHERE char(0) || r.id = contents.normalized_url) "
        "WHERE normalized_url IN (SELECT char(0) || id FROM temp.rekey)"
    )
    db.execute("DROP TABLE temp.rekey")
    return RekeyResult(rekeyed=len(moving), merged=max(0, merged))
