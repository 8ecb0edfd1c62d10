"""``scrapy crawl`` in this project: Scrapy's own, with every increcrawl setting
checked first, so a bad value stops the crawl with one line naming it."""

from __future__ import annotations

import argparse

from scrapy.commands.crawl import Command as ScrapyCrawl
from scrapy.exceptions import UsageError

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig


class Command(ScrapyCrawl):
    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        try:
            IncrecrawlConfig.from_settings(self.settings)
        except ConfigError as exc:
            raise UsageError(f"bad setting {exc}", print_help=False) from None
        super().run(args, opts)
