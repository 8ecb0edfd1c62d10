"""``scrapy crawl`` in this project: Scrapy's own, after checking every increcrawl
setting, the spider's arguments and the state database, so bad input stops the crawl
with one line and exit code 2 and a database in use with 75 (on every supported
Scrapy); and an exit code for how the crawl ended (``close_reasons.py``).

Every reason is logged at ERROR, so it reaches ``LOG_FILE`` (a Scrapyd job's log),
and is on stderr too (cron's mail) when the log goes elsewhere."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from scrapy import signals
from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError
from scrapy.settings import BaseSettings

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.config import ConfigError, config_for
from increcrawl_scrapy.state import StateError, StateLockedError, StateStore

logger = logging.getLogger(__name__)


class Command(ScrapyCrawl):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        try:
            config = config_for(self.settings)
            if args:
                self._check_arguments(args[0], opts.spargs)
            # Opened (and migrated) once up front: the crawl opens it again for good.
            StateStore.from_config(config, exclusive=True).close()
        except ConfigError as exc:
            raise self._bad_input(f"bad setting {exc}") from None
        except StateLockedError as exc:
            _tell(self.settings, f"Try later: {exc}")
            self.exitcode = close_reasons.DATABASE_IN_USE
            return
        except StateError as exc:
            raise self._bad_input(str(exc)) from None
        del close_reasons.seen[:]
        self._record_close_reasons()
        super().run(args, opts)
        if not self.exitcode:
            self.exitcode = close_reasons.exit_code(close_reasons.seen)

    def _record_close_reasons(self) -> None:
        """Each crawl's close reason, whatever closed it (the state may never have
        opened: a database another program holds)."""
        process = self.crawler_process
        assert process is not None
        crawl = process.crawl

        def crawl_recorded(crawler_or_spidercls: Any, *args: Any, **kwargs: Any) -> Any:
            crawler = process.create_crawler(crawler_or_spidercls)
            crawler.signals.connect(_record, signal=signals.spider_closed)
            return crawl(crawler, *args, **kwargs)

        process.crawl = crawl_recorded  # type: ignore[method-assign]

    def _bad_input(self, message: str) -> UsageError:
        """Scrapy prints *message* on stderr; a log file gets it too."""
        assert self.settings is not None
        if self.settings.getbool("LOG_ENABLED") and self.settings.get("LOG_FILE"):
            logger.error(message)
        return UsageError(message, print_help=False)

    def _check_arguments(self, name: str, arguments: dict) -> None:
        """The incremental spider's arguments, judged before anything starts."""
        from increcrawl_scrapy.crawl.arguments import FLAGS, flag
        from increcrawl_scrapy.discovery.sources import parse_sources
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
            for argument in FLAGS:
                if argument in arguments:
                    flag(argument, arguments[argument])
        except ValueError as exc:
            raise self._bad_input(str(exc)) from None


def _record(spider: Any, reason: str) -> None:
    close_reasons.seen.append(reason)


def _tell(settings: BaseSettings, message: str) -> None:
    """*message* at ERROR in the log, and on stderr when the log is not there."""
    logger.error(message)
    if not settings.getbool("LOG_ENABLED") or settings.get("LOG_FILE"):
        print(message, file=sys.stderr)
