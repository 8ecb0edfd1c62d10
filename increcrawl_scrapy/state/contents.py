"""Kept content (``INCRECRAWL_KEEP_CONTENT``): each page's text as its last change
left it, and the text before that change, zlib-compressed.

Only a change moves the stored text to ``previous``: an unchanged fetch differs at
most in volatile parts, so the pair always shows the page's last real change
(``scrapy increcrawl diff``) and, for a page reported changed every time, the two
versions whose difference the volatile rules missed (``scrapy increcrawl noisy``).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from increcrawl_scrapy.state.backend import Session


def pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 6)


def unpack(blob: bytes | None) -> str | None:
    return None if blob is None else zlib.decompress(blob).decode("utf-8")


@dataclass(frozen=True)
class KeptVersions:
    """A page's last change: the text before it (None if none was kept) and after."""

    previous: str | None
    text: str
    changed_at: float


class KeptContents:
    """Texts recorded by the crawl, written with the results they belong to."""

    def __init__(self) -> None:
        self._pending: dict[str, tuple[bytes, bool, float]] = {}

    def add(self, key: str, text: str, *, changed: bool, now: float) -> None:
        if not changed and key in self._pending:
            return  # a change not yet written stays the change
        self._pending[key] = (pack(text), changed, now)

    def discard(self, key: str) -> None:
        self._pending.pop(key, None)

    def take(self, keys: list[str]) -> list[tuple[str, bytes, float, bool]]:
        """The rows of *keys*' texts (the results being written), out of the buffer."""
        rows = []
        for key in keys:
            kept = self._pending.pop(key, None)
            if kept is not None:
                blob, changed, now = kept
                rows.append((key, blob, now, changed))
        return rows

    def restore(self, rows: list[tuple[str, bytes, float, bool]]) -> None:
        """Texts whose write failed: back in the buffer, unless a later one came."""
        for key, blob, now, changed in rows:
            self._pending.setdefault(key, (blob, changed, now))


def last_change(db: Session, key: str) -> KeptVersions | None:
    row = db.execute(db.sql.last_change, (key,)).fetchone()
    if row is None:
        return None
    text = unpack(row[1])
    assert text is not None
    return KeptVersions(previous=unpack(row[0]), text=text, changed_at=float(row[2]))
