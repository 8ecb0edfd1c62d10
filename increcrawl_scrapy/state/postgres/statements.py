"""Every statement PostgreSQL says, by the names of ``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.state.postgres.discovery_sql import DiscoverySQL
from increcrawl_scrapy.state.postgres.history_sql import HistorySQL
from increcrawl_scrapy.state.postgres.results_sql import ResultSQL
from increcrawl_scrapy.state.postgres.upkeep_sql import UpkeepSQL
from increcrawl_scrapy.state.shared_sql import SharedSQL


class PostgresStatements(DiscoverySQL, ResultSQL, UpkeepSQL, HistorySQL, SharedSQL):
    """PostgreSQL's SQL: ``%s`` and ``%(name)s`` parameters (psycopg's), 0/1 flags
    compared as integers, ``IS DISTINCT FROM``, ``LEAST``, row locks."""
