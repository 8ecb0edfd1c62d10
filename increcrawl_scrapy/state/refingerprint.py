"""When the volatile rules change, stored fingerprints are taken again from kept
content, so adding a pattern does not report every page it touches as changed.

Without kept content (``INCRECRAWL_KEEP_CONTENT``) there is no text to take them
from: each page the new rules touch is reported changed once, on its next fetch.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable

from increcrawl_scrapy.state.contents import unpack
from increcrawl_scrapy.state.database import Database

logger = logging.getLogger(__name__)

_BATCH = 1_000


def rules_digest(patterns: tuple[str, ...]) -> str:
    return hashlib.sha256(json.dumps(patterns).encode("utf-8")).hexdigest()


def check_volatile_rules(
    database: Database, patterns: tuple[str, ...], fingerprint: Callable[[str], str]
) -> int:
    """Store the digest of *patterns* (every rule in force, defaults included); if the
    stored one differs, fingerprint each kept text again. Returns the rows updated."""
    wanted = rules_digest(patterns)
    row = database.execute("SELECT value FROM settings WHERE name = 'volatile_rules'").fetchone()
    if row is not None and row["value"] == wanted:
        return 0
    updated = 0
    with database.transaction() as db:
        if row is not None:
            kept = db.execute(
                "SELECT c.normalized_url, c.text, p.content_hash FROM contents AS c "
                "JOIN pages AS p ON p.normalized_url = c.normalized_url "
                "WHERE p.content_hash IS NOT NULL"
            )
            while batch := kept.fetchmany(_BATCH):
                changes = []
                for key, blob, stored in batch:
                    text = unpack(blob)
                    digest = fingerprint(text) if text is not None else stored
                    if digest != stored:
                        changes.append((digest, key))
                db.executemany(
                    "UPDATE pages SET content_hash = ? WHERE normalized_url = ?", changes
                )
                updated += len(changes)
        db.execute(
            "INSERT INTO settings (name, value) VALUES ('volatile_rules', ?) "
            "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
            (wanted,),
        )
    if row is not None:
        logger.info(
            "The volatile rules changed: %d fingerprints taken again from kept content",
            updated,
        )
    return updated
