"""Where a state lives: a SQLite file, or a PostgreSQL server (a DSN)."""

from __future__ import annotations

import re


def is_postgres(location: str) -> bool:
    return location.startswith(("postgresql://", "postgres://"))


def shown(location: str) -> str:
    """*location* fit for a message: a DSN's password is never printed (in its
    userinfo nor as a ``password=`` parameter)."""
    if not is_postgres(location):
        return location
    location = _PASSWORD_PARAMETER.sub(r"\1***", location)
    if "@" not in location.split("?", 1)[0]:
        return location
    scheme, rest = location.split("://", 1)
    authority, mark, query = rest.partition("?")
    userinfo, _, where = authority.rpartition("@")
    if ":" in userinfo:
        authority = f"{userinfo.split(':', 1)[0]}:***@{where}"
    return f"{scheme}://{authority}{mark}{query}"


_PASSWORD_PARAMETER = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)
