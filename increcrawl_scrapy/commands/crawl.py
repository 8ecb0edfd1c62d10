"""``scrapy crawl`` in this project: Scrapy's own, after checking every increcrawl
setting and the state database, so a bad value, a corrupt file or a database in use
stops the crawl with one line and exit code 2 (on every supported Scrapy)."""

from __future__ import annotations

import argparse

from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.state import StateError, StateStore


class Command(ScrapyCrawl):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        try:
            config = IncrecrawlConfig.from_settings(self.settings)
            # Opened (and migrated) once up front: the crawl opens it again for good.
            StateStore.from_config(config, exclusive=True).close()
        except ConfigError as exc:
            raise UsageError(f"bad setting {exc}", print_help=False) from None
        except StateError as exc:
            raise UsageError(str(exc), print_help=False) from None
        super().run(args, opts)
