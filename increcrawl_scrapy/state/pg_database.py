"""Old home of the PostgreSQL backend (``postgres/database.py``): kept so that
existing imports work."""

from increcrawl_scrapy.state.postgres.database import (
    Connection,
    PostgresDatabase,
    connect,
    read_only,
)

__all__ = ["Connection", "PostgresDatabase", "connect", "read_only"]
