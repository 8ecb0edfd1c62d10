"""When what is fingerprinted changes, no page is reported changed for it.

The volatile rules: stored fingerprints are taken again from kept content
(``INCRECRAWL_KEEP_CONTENT``). How a page's text is taken (main content, selector,
the converters' versions): kept contents are of the old text too. Where there is no
text to take them from, a new baseline starts: each page's next fetch takes its new
fingerprint silently (``Results.record``; an edit made between the last fetch before and
the first after is taken as the baseline).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable

from increcrawl_scrapy.schedule.rows import PageState
from increcrawl_scrapy.state.backend import Backend, Session
from increcrawl_scrapy.state.contents import unpack

logger = logging.getLogger(__name__)

_BATCH = 1_000


def rules_digest(patterns: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps(patterns).encode("utf-8")).hexdigest()


def check_volatile_rules(
    database: Backend,
    patterns: tuple[str, ...],
    fingerprint: Callable[[str], str],
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
            _mark_old(db, db.sql.mark_old_without_content)
        write_setting(db, "volatile_rules", wanted)
    if row is not None:
        logger.info(
            "The volatile rules changed: %d fingerprints taken again from kept content, "
            "the others at their next fetch",
            updated,
        )
    return updated


#: Marks a fingerprint taken another way than today's: the page's next fetch with
#: content takes its new one without reporting a change (``Results.record``).
OLD = "old:"


def taken_another_way(page: PageState | None) -> bool:
    """Whether *page*'s stored fingerprint is marked old (its next one is a baseline)."""
    return page is not None and (page.content_hash or "").startswith(OLD)


def check_content_scheme(database: Backend, scheme: str) -> None:
    """Store *scheme* (what decides a page's text: ``ContentOptions.scheme``); if the
    state's fingerprints were taken another way, mark them all as old. Kept contents
    cannot give new ones: they are of the old text too."""
    stored = read_setting(database, "content_scheme")
    if stored == scheme:
        return
    with database.transaction() as db:
        marked = _mark_old(db, db.sql.mark_old)
        write_setting(db, "content_scheme", scheme)
    if marked:
        logger.info(
            "Pages' text is now taken another way (%s): each page's next fetch takes "
            "a new fingerprint without reporting a change (%d pages)",
            scheme,
            marked,
        )


def _mark_old(db: Session, statement: str) -> int:
    """Fingerprints marked with ``OLD`` by *statement* (``mark_old...``): how many."""
    return max(db.execute(statement).rowcount or 0, 0)


def read_setting(database: Session, name: str) -> str | None:
    """A value of table ``settings`` (what the state was made under, what a crawl
    keeps for the next), or None."""
    row = database.execute(database.sql.read_setting, (name,)).fetchone()
    return None if row is None else str(row["value"])


def write_setting(db: Session, name: str, value: str) -> None:
    db.execute(db.sql.write_setting, (name, value))
