"""The state kept true to the settings it is read under: when they change, the
rows follow, so no URL is split across two rows and no page is reported changed
for how it is fingerprinted.

Keys are normalized URLs: when the normalization settings change, rows are re-keyed
under the new rules (``check_normalization``). When the volatile rules change, stored
fingerprints are taken again from kept content (``INCRECRAWL_KEEP_CONTENT``;
``check_volatile_rules``). When how a page's text is taken changes (main content,
selector, the converters' versions), kept contents are of the old text too
(``check_content_scheme``). Where there is no text to take a fingerprint from, a new
baseline starts: each page is made due, re-read whole in the run that starts (no
validators: a 304 would keep the old mark until the page's first edit, which would
become the baseline) and its new fingerprint taken silently (``Results.record``).
An edit made after that run is reported; one made between the page's last fetch
before the change and that run is taken as the baseline. What the state was made
under is kept in its table ``settings`` (``read_setting``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from increcrawl_scrapy.schedule.rows import ITEM_MARK, OLD_FINGERPRINT, PageState, RekeyResult
from increcrawl_scrapy.state.backend import Backend, Session
from increcrawl_scrapy.state.contents import unpack

logger = logging.getLogger(__name__)

# -- keys under changed normalization settings ---------------------------------


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


# -- fingerprints under changed volatile rules or text -------------------------

_BATCH = 1_000


def rules_digest(patterns: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps(patterns).encode("utf-8")).hexdigest()


def check_volatile_rules(
    database: Backend,
    patterns: tuple[str, ...],
    fingerprint: Callable[[str], str],
    now: float,
) -> int:
    """Store the digest of *patterns* (every rule in force, defaults included); if the
    stored one differs, fingerprint each kept text again. Returns the rows updated."""
    wanted = rules_digest(patterns)
    row = database.execute(database.sql.read_setting, ("volatile_rules",)).fetchone()
    if row is not None and row["value"] == wanted:
        return 0
    updated = 0
    with database.transaction() as db:
        if row is not None:
            kept = db.execute(db.sql.kept_fingerprints)
            while batch := kept.fetchmany(_BATCH):
                changes = []
                for key, blob, stored in batch:
                    text = unpack(blob)
                    digest = fingerprint(text) if text is not None else stored
                    if digest != stored:
                        changes.append((digest, key))
                db.executemany(db.sql.set_fingerprint, changes)
                updated += len(changes)
            # Pages without kept content: their next fetch takes the new fingerprint.
            _mark_old(db, db.sql.mark_old_without_content, now)
        write_setting(db, "volatile_rules", wanted)
    if row is not None:
        logger.info(
            "The volatile rules changed: %d fingerprints taken again from kept content, "
            "the others at their next fetch",
            updated,
        )
    return updated


#: Marks a fingerprint taken another way than today's: the page's next fetch reads it
#: whole (no validators: ``page_items.conditions``) and takes its new one without
#: reporting a change (``Results.record``).
OLD = OLD_FINGERPRINT


def taken_another_way(page: PageState | None, items_changed: bool = False) -> bool:
    """Whether *page*'s stored fingerprint is marked old (its next one is a baseline),
    unless the add-on's match says its items changed: their own fields pass through
    no converter (``StateStore.record``)."""
    return not items_changed and page is not None and page.fingerprint_old


def check_content_scheme(database: Backend, schemes: tuple[str, ...], now: float) -> int:
    """Store *schemes*' first (what decides a page's text: ``ContentOptions.scheme``;
    the others spell it as earlier versions did); if the state's fingerprints were
    taken another way, mark its pages' as old (not item rows': an item's fields are
    no page text) and make them due at *now*. Kept contents cannot give new ones:
    they are of the old text too. Returns the pages marked old (said in the log)."""
    stored = read_setting(database, "content_scheme")
    if stored != schemes[0]:
        with database.transaction() as db:
            if stored not in schemes:
                _mark_old(db, db.sql.mark_old, now)
            write_setting(db, "content_scheme", schemes[0])
    count = old_fingerprints(database)
    say_old_fingerprints(count, schemes[0])
    return count


def _mark_old(db: Session, statement: str, now: float) -> int:
    """Mark fingerprints with ``OLD`` by *statement* (``mark_old...``) and make their
    pages due at *now*: each is re-read whole in the run that starts, so its new
    baseline is the page as it is then, and every edit after it is compared (a page
    re-read only when its schedule says would take an edit made meanwhile as its
    baseline). Returns how many were marked."""
    marked = max(db.execute(statement).rowcount or 0, 0)
    if marked:
        db.execute(db.sql.make_old_due, (now, now))
    return marked


def old_fingerprints(database: Session) -> int:
    """Pages (not gone) whose fingerprint is of an old text scheme: re-read whole."""
    row = database.execute(database.sql.count_old).fetchone()
    return int(row[0] or 0) if row is not None else 0


def say_old_fingerprints(count: int, scheme: str) -> None:
    """The run's one line on what a new text scheme costs, and when it is paid."""
    if count:
        logger.info(
            "%d pages have a fingerprint taken another way than today's (a changed setting or "
            "volatile rule, a converter that writes text otherwise; text scheme now %s): "
            "each is re-read whole in this run (%d requests without If-None-Match or "
            "If-Modified-Since, made due now if their schedule had not) and its new "
            "fingerprint taken without reporting a change (stat "
            "increcrawl/pages/rebaselined); edits after that are reported as ever",
            count,
            scheme,
            count,
        )


def read_setting(database: Session, name: str) -> str | None:
    """A value of table ``settings`` (what the state was made under, what a crawl
    keeps for the next), or None."""
    row = database.execute(database.sql.read_setting, (name,)).fetchone()
    return None if row is None else str(row["value"])


def write_setting(db: Session, name: str, value: str) -> None:
    db.execute(db.sql.write_setting, (name, value))
