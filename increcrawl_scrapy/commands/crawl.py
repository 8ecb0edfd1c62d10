"""``scrapy crawl`` in this project: Scrapy's own, after checking every increcrawl
setting, the spider's arguments and the state database, so bad input stops the crawl
with one line and exit code 2 and a database in use with 75 (on every supported
Scrapy); and an exit code for how the crawl ended (``close_reasons.py``)."""

from __future__ import annotations

import argparse
import sys

from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.state import StateError, StateLockedError, StateStore


class Command(ScrapyCrawl):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        try:
            config = IncrecrawlConfig.from_settings(self.settings)
            if args:
                self._check_arguments(args[0], opts.spargs)
            # Opened (and migrated) once up front: the crawl opens it again for good.
            StateStore.from_config(config, exclusive=True).close()
        except ConfigError as exc:
            raise UsageError(f"bad setting {exc}", print_help=False) from None
        except StateLockedError as exc:
            print(f"Try later: {exc}", file=sys.stderr)
            self.exitcode = close_reasons.DATABASE_IN_USE
            return
        except StateError as exc:
            raise UsageError(str(exc), print_help=False) from None
        del close_reasons.seen[:]
        super().run(args, opts)
        if not self.exitcode:
            self.exitcode = close_reasons.exit_code(close_reasons.seen)

    def _check_arguments(self, name: str, arguments: dict) -> None:
        """The incremental spider's arguments, judged before anything starts."""
        from increcrawl_scrapy.spiders.discoverer import parse_sources
        from increcrawl_scrapy.spiders.incremental import IncrementalSpider

        assert self.crawler_process is not None
        try:
            spider = self.crawler_process.spider_loader.load(name)
        except KeyError:
            return  # Scrapy says so itself
        if not issubclass(spider, IncrementalSpider):
            return
        try:
            parse_sources(**arguments)
        except ValueError as exc:
            raise UsageError(str(exc), print_help=False) from None
