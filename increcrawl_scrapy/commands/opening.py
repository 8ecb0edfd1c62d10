"""How every ``scrapy increcrawl`` state command finds and opens the database:
one message and a non-zero exit for a bad setting or a missing file; read-only
commands never write (``mode=ro``: they work on a read-only file, and never
create one)."""

from __future__ import annotations

import os
import sqlite3
import time

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.state.locations import is_postgres, shown


def config_of(settings: BaseSettings) -> IncrecrawlConfig | None:
    try:
        return IncrecrawlConfig.from_settings(settings)
    except ConfigError as exc:
        print(f"Bad setting: {exc}")
        return None


def exists(config: IncrecrawlConfig) -> bool:
    if is_postgres(config.db_path):
        print(
            f"INCRECRAWL_DB is a PostgreSQL state ({shown(config.db_path)}): this command "
            "reads SQLite files; copy it first with `scrapy increcrawl migrate --from "
            "postgresql://... --to copy.sqlite` and point INCRECRAWL_DB at the copy"
        )
        return False
    if os.path.exists(config.db_path):
        return True
    print(f"No state database at {config.db_path} (INCRECRAWL_DB)")
    return False


def read_only(config: IncrecrawlConfig) -> sqlite3.Connection:
    db = sqlite3.connect(f"file:{config.db_path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def now(config: IncrecrawlConfig) -> float:
    """The crawl's clock (INCRECRAWL_CLOCK), so "due now" agrees with the crawl."""
    return time.time() if config.clock is time.time else config.clock()
