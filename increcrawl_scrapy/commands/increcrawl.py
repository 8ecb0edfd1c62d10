"""``scrapy increcrawl check`` and ``scrapy increcrawl demo``."""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from increcrawl_scrapy.commands import check, demo

SUBCOMMANDS = {"check": check.run, "demo": demo.run}


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "check | demo [--dir DIR] [--pages N]"

    def short_desc(self) -> str:
        return "Check the Geonode API key, or run the offline demo"

    def long_desc(self) -> str:
        return (
            "check: checks GEONODE_API_KEY against the API and suggests GEONODE_CONCURRENCY. "
            "demo: starts a sample site and a stand-in Geonode API on 127.0.0.1 and runs "
            "`scrapy crawl incremental` twice, with pages edited, added and deleted between."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--dir", help="demo: where to keep the state database and feeds")
        parser.add_argument("--pages", type=int, default=24, help="demo: sample site size")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1 or args[0] not in SUBCOMMANDS:
            raise UsageError(f"choose one of: {', '.join(SUBCOMMANDS)}")
        assert self.settings is not None
        self.exitcode = SUBCOMMANDS[args[0]](self.settings, opts)
