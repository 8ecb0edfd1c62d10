"""Every statement SQLite says, by the names of ``state/statements.py``."""

from __future__ import annotations

from increcrawl_scrapy.state.shared_sql import SharedSQL
from increcrawl_scrapy.state.sqlite.discovery_sql import DiscoverySQL
from increcrawl_scrapy.state.sqlite.history_sql import HistorySQL
from increcrawl_scrapy.state.sqlite.results_sql import ResultSQL
from increcrawl_scrapy.state.sqlite.upkeep_sql import UpkeepSQL


class SQLiteStatements(DiscoverySQL, ResultSQL, UpkeepSQL, HistorySQL, SharedSQL):
    """SQLite's SQL: ``?`` and ``:name`` parameters, its index hints (``INDEXED BY``,
    ``+column``), ``iif``, two-argument ``min``."""
