"""Keys are normalized URLs: when the normalization settings change, rows are
re-keyed under the new rules, so no URL is ever split across two rows."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from increcrawl_scrapy.schedule.rows import ITEM_MARK, RekeyResult
from increcrawl_scrapy.state.backend import Backend, Session

logger = logging.getLogger(__name__)


def stored_normalize(
    database: Session, rules: object, normalize: Callable[[str], str]
) -> Callable[[str], str]:
    """How the stored keys were made: ``normalize_url`` under the stored settings, if
    they were recorded under these *rules* (``urls.RULES_VERSION``), else *normalize*.
    The operator's commands key URLs by it, never re-keying the state with their own
    shell's settings (a crawl does that, with its project's)."""
    from increcrawl_scrapy.urls import normalize_url

    row = database.execute(database.sql.read_setting, ("normalization",)).fetchone()
    stored = json.loads(row["value"]) if row is not None else {}
    if stored.pop("rules", None) != rules:
        return normalize
    options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in stored.items()}
    return functools.partial(normalize_url, **options)


def check_normalization(
    database: Backend, settings: Mapping[str, Any], normalize: Callable[[str], str]
) -> RekeyResult:
    """Store *settings*; if the stored ones differ, re-key every row first (one
    transaction). A database that never recorded them takes them as they are."""
    wanted = json.dumps(dict(settings), sort_keys=True)
    row = database.execute(database.sql.read_setting, ("normalization",)).fetchone()
    if row is not None and row["value"] == wanted:
        return RekeyResult(0, 0)
    with database.transaction() as db:
        result = RekeyResult(0, 0) if row is None else _rekey(db, normalize)
        db.execute(db.sql.write_setting, ("normalization", wanted))
    if result.rekeyed:
        logger.warning(
            "URL normalization settings changed (%s): %d rows re-keyed, %d merged "
            "into the row of the same URL under the new rules",
            wanted,
            result.rekeyed,
            result.merged,
        )
    return result


def _rekey(db: Session, normalize: Callable[[str], str]) -> RekeyResult:
    """Re-key every row with *normalize*; where two rows meet, the one fetched (then
    seen) most recently stays. Kept texts move with their rows (those of rows merged
    away go with them)."""
    sql = db.sql
    db.execute(sql.rekey_table)
    db.execute(sql.clear_rekey)
    moving: list[tuple[int, str]] = []
    for row_id, key, url in db.execute(sql.all_keys).fetchall():
        try:
            new_key = normalize(url)
        except ValueError:
            continue  # not a URL under the new rules either: keep its key
        mark = key.find(ITEM_MARK)
        if mark >= 0:  # an item row: its page's key moves, the item's own part stays
            new_key += key[mark:]
        if new_key != key:
            moving.append((row_id, new_key))
    db.executemany(sql.add_rekey, moving)
    db.execute(sql.rekey_index)
    merged = db.execute(sql.merge_collisions).rowcount
    # Texts and checks of the rows merged away go; those of moving rows take the
    # rows' way (checks by id, which stays).
    db.execute(sql.drop_orphan_contents)
    db.execute(sql.drop_orphan_checks)
    # Through a key no row has, so that swaps never collide on the way.
    for statement in (sql.park_contents, sql.park_pages, sql.rekey_pages, sql.rekey_contents):
        db.execute(statement)
    db.execute(sql.drop_rekey)
    return RekeyResult(rekeyed=len(moving), merged=max(0, merged))
