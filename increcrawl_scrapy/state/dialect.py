"""The state package's SQL, as PostgreSQL reads it.

The parts write SQLite's SQL; on PostgreSQL each statement is rewritten once (then
cached) by the rules below. They cover the constructs the parts use and no more:
a statement they do not cover fails loudly in the contract tests, never silently.
Statements no rule can express are given per dialect by the part itself
(``OVERRIDES``).
"""

from __future__ import annotations

import functools
import re

#: SQLite statement -> the PostgreSQL one, for what no rewrite expresses.
OVERRIDES: dict[str, str] = {}

# A temporary table's conflict target and the columns a REPLACE rewrites.
_REPLACE = {
    "temp.moves": ("normalized_url", ("host", "lastmod")),
}

_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, flags), replacement)
    for pattern, replacement, flags in (
        (r"\bWITHOUT ROWID\b", "", 0),
        (r"\bINDEXED BY \w+", "", 0),
        (r"\bCROSS JOIN (\w+ AS \w+)(\s+ON)\b", r"JOIN \1\2", 0),  # SQLite's join order mark
        (r"\+(\w+\.\w+)", r"\1", 0),  # SQLite's "do not use an index" mark
        (r"\bNOT (\w+\.(?:future|feed))\b", r"\1 = 0", 0),  # 0/1 flags
        (r"\biif\((\w+), ([^,()]+), ([^,()]+)\)", r"CASE WHEN \1 <> 0 THEN \2 ELSE \3 END", 0),
        (r"\bmin\(([^,()]+), ([^,()]+)\)", r"LEAST(\1, \2)", 0),
        (r"\bIS NOT (?!NULL\b)", "IS DISTINCT FROM ", 0),
        (r"\bIS (?!NOT\b|NULL\b|DISTINCT\b)", "IS NOT DISTINCT FROM ", 0),
        (r"\bREAL\b", "DOUBLE PRECISION", 0),
        (r"\bTEXT\b(?! COLLATE)", 'TEXT COLLATE "C"', 0),  # byte order, as SQLite's
        (r"\bchar\(0\) \|\| ", "chr(1) || ", 0),  # PostgreSQL text holds no NUL
        (r"\btemp\.", "pg_temp.", 0),
        (r"CREATE INDEX IF NOT EXISTS pg_temp\.(\w+) ON", r"CREATE INDEX IF NOT EXISTS \1 ON", 0),
        (r"%", "%%", 0),
        (r"\?", "%s", 0),
        (r"(?<!:):(\w+)", r"%(\1)s", 0),
    )
)


@functools.lru_cache(maxsize=512)
def postgres(sql: str) -> str:
    """*sql* (SQLite's) as PostgreSQL's."""
    if sql in OVERRIDES:
        return OVERRIDES[sql]
    text = sql
    conflict = ""
    ignore = re.match(r"\s*INSERT OR IGNORE INTO", text)
    replace = re.match(r"\s*INSERT OR REPLACE INTO (\S+)", text)
    if ignore:
        text = text.replace("INSERT OR IGNORE INTO", "INSERT INTO", 1)
        conflict = " ON CONFLICT DO NOTHING"
    elif replace:
        key, columns = _REPLACE[replace.group(1)]
        text = text.replace("INSERT OR REPLACE INTO", "INSERT INTO", 1)
        sets = ", ".join(f"{column} = excluded.{column}" for column in columns)
        conflict = f" ON CONFLICT ({key}) DO UPDATE SET {sets}"
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text.rstrip() + conflict
