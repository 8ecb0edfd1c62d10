"""How every ``scrapy increcrawl`` state command finds and opens the database, a
SQLite file or a PostgreSQL state: one message and a non-zero exit for a bad
setting, a missing file or an unreachable server; read-only commands never write
(SQLite's ``mode=ro``: they work on a read-only file, and never create one;
PostgreSQL's read-only transactions)."""

from __future__ import annotations

import os
import time

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig, config_for
from increcrawl_scrapy.state import StateError, StateReader, is_postgres


def config_of(settings: BaseSettings) -> IncrecrawlConfig | None:
    """A command's settings object (settings, no crawler), or None once a bad setting
    is told."""
    try:
        return config_for(settings)
    except ConfigError as exc:
        print(f"Bad setting: {exc}")
        return None


def exists(config: IncrecrawlConfig) -> bool:
    if is_postgres(config.db_path):
        try:
            StateReader.open(config.db_path).close()
        except StateError as exc:
            print(str(exc))
            return False
        return True
    if os.path.exists(config.db_path):
        return True
    print(f"No state database at {config.db_path} (INCRECRAWL_DB)")
    return False


def read_only(config: IncrecrawlConfig) -> StateReader:
    """The state's read-only door: one method a question (``state.StateReader``)."""
    return StateReader.open(config.db_path)


def now(config: IncrecrawlConfig) -> float:
    """The crawl's clock (INCRECRAWL_CLOCK), so "due now" agrees with the crawl."""
    return time.time() if config.clock is time.time else config.clock()
