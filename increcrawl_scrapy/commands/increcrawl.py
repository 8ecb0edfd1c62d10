"""``scrapy increcrawl check | demo | status | due | forget | diff | noisy | report |
migrate``."""

from __future__ import annotations

import argparse
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

SUBCOMMANDS = (
    "check",
    "demo",
    "status",
    "due",
    "forget",
    "diff",
    "noisy",
    "report",
    "migrate",
)
#: Subcommands that take one URL argument (optional for due and forget).
_WITH_URL = ("due", "forget", "diff", "report")


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return (
            "check | demo [--dir DIR] [--pages N] | status [--seed SEED] [--json] | "
            "due URL|--seed SEED|--all | forget URL|--seed SEED | diff URL | "
            "noisy [--min-streak K] [--seed SEED] [--json] | "
            "report -o FILE [--seed SEED] [URL] | migrate --from SOURCE --to TARGET"
        )

    def short_desc(self) -> str:
        return "Check the API key, run the offline demo, see or edit the crawl state"

    def long_desc(self) -> str:
        return (
            "check: checks GEONODE_API_KEY against the API and suggests GEONODE_CONCURRENCY. "
            "demo: starts a sample site and a stand-in Geonode API on 127.0.0.1 and runs "
            "`scrapy crawl incremental` twice, with pages edited, added and deleted between. "
            "status: pages, due, intervals, lastmod verdicts and the last runs, per seed "
            "(read-only). due: make a page, a seed or everything due now. forget: drop a "
            "page or a seed (a page still listed comes back as new). diff: what a page's "
            "last change changed (needs INCRECRAWL_KEEP_CONTENT). noisy: pages reported "
            "changed on every fetch, what differed, and a volatile pattern that would not "
            "see it. report: one self-contained HTML file of the crawl's history (with a "
            "URL, that page's history too). migrate: copy a whole state between SQLite and "
            "PostgreSQL (postgresql://...), checked."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--dir", help="demo: a new folder for the state database and feeds")
        parser.add_argument("--pages", type=int, default=24, help="demo: sample site size")
        parser.add_argument("--seed", help="status, due, forget: one seed")
        parser.add_argument("--all", action="store_true", help="due: every page")
        parser.add_argument("--json", action="store_true", help="status, noisy: as JSON")
        parser.add_argument(
            "--min-streak",
            type=int,
            default=3,
            help="noisy: changes in a row that make a page noisy (default 3)",
        )
        parser.add_argument("-o", "--output", help="report: the HTML file to write")
        parser.add_argument("--from", dest="source", help="migrate: the state to copy")
        parser.add_argument("--to", dest="target", help="migrate: a new, empty state")
        parser.add_argument(
            "--sample", type=int, default=1000, help="migrate: rows compared per table"
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in SUBCOMMANDS or len(args) > (2 if args[0] in _WITH_URL else 1):
            raise UsageError(f"choose one of: {', '.join(SUBCOMMANDS)}")
        assert self.settings is not None
        name, url = args[0], (args[1] if len(args) > 1 else None)
        # Imported here: Scrapy loads this command for every ``scrapy`` command run
        # where the package is installed, and most never read a state.
        from increcrawl_scrapy.commands import check, demo, migrate, pages, report, state

        if name in ("due", "forget"):
            self.exitcode = state.edit(name, self.settings, opts, url)
        elif name == "diff":
            self.exitcode = pages.diff(self.settings, url)
        elif name == "noisy":
            self.exitcode = pages.noisy(self.settings, opts)
        elif name == "report":
            self.exitcode = report.write(self.settings, opts, url)
        elif name == "migrate":
            self.exitcode = migrate.run(opts)
        elif name == "status":
            self.exitcode = state.status(self.settings, opts)
        else:
            self.exitcode = {"check": check.run, "demo": demo.run}[name](self.settings, opts)
