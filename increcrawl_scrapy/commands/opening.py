"""How every ``scrapy increcrawl`` state command finds and opens the database, a
SQLite file or a PostgreSQL state: one message and a non-zero exit for a bad
setting, a missing file or an unreachable server; read-only commands never write
(SQLite's ``mode=ro``: they work on a read-only file, and never create one;
PostgreSQL's read-only transactions)."""

from __future__ import annotations

import os
import sqlite3
import time
from typing import Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.state import pg_database
from increcrawl_scrapy.state.database import StateError
from increcrawl_scrapy.state.locations import is_postgres
from increcrawl_scrapy.state.migrate import driver_errors


def config_of(settings: BaseSettings) -> IncrecrawlConfig | None:
    try:
        return IncrecrawlConfig.from_settings(settings)
    except ConfigError as exc:
        print(f"Bad setting: {exc}")
        return None


def exists(config: IncrecrawlConfig) -> bool:
    if is_postgres(config.db_path):
        try:
            read_only(config).raw.close()
        except StateError as exc:
            print(str(exc))
            return False
        return True
    if os.path.exists(config.db_path):
        return True
    print(f"No state database at {config.db_path} (INCRECRAWL_DB)")
    return False


def read_only(config: IncrecrawlConfig) -> Any:
    """A read-only connection to the state; SQLite's SQL either way."""
    if is_postgres(config.db_path):
        return pg_database.read_only(config.db_path)
    db = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


#: What reading a state can raise: the drivers' errors.
ERRORS = driver_errors()


def now(config: IncrecrawlConfig) -> float:
    """The crawl's clock (INCRECRAWL_CLOCK), so "due now" agrees with the crawl."""
    return time.time() if config.clock is time.time else config.clock()
