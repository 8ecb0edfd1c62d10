"""Where a state lives: a SQLite file, or a PostgreSQL server (a DSN)."""

from __future__ import annotations


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def shown(location: str) -> str:
    """*location* fit for a message: a DSN's password is never printed."""
    if not is_postgres(location) or "@" not in location:
        return location
    scheme, rest = location.split("://", 1)
    userinfo, _, where = rest.rpartition("@")
    return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{where}" if ":" in userinfo else location
