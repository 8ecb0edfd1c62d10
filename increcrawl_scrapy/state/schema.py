"""Old home of the SQLite schema (``sqlite/schema.py``): kept so that existing
imports work."""

from increcrawl_scrapy.state.sqlite.schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION

__all__ = ["APPLICATION_ID", "MIGRATIONS", "SCHEMA_VERSION"]
