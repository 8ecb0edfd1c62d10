"""Old home of the PostgreSQL schema (``postgres/schema.py``): kept so that existing
imports work."""

from increcrawl_scrapy.state.postgres.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    SQLITE_VERSION,
    migrate,
    version,
)

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLITE_VERSION", "migrate", "version"]
