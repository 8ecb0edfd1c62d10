"""The warnings and errors a crawl logged, kept to be repeated in its run summary:
an operator reading the last lines of a long log (or a Scrapyd job's) sees what
went wrong without searching for it.

Grouped by the message's template (``record.msg``), so a warning logged for 5,000
pages is one line with its count and its first instance."""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

from increcrawl_scrapy import compat
from increcrawl_scrapy.crawl.expected_failures import in_one_line

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

#: Distinct warnings repeated in the summary (the most frequent first).
SHOWN = 10
#: A repeated message is cut to this many characters.
WIDTH = 300


class KeptWarnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.counts: Counter[tuple[str, str]] = Counter()
        self.first: dict[tuple[str, str], str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        key = (record.levelname, str(record.msg))
        self.counts[key] += 1
        if key not in self.first:
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            self.first[key] = message.splitlines()[0] if message else ""

    def lines(self) -> list[str]:
        """The summary's lines: ``N x LEVEL: first message``, the most frequent first."""
        shown = self.counts.most_common(SHOWN)
        lines = []
        for (level, template), count in shown:
            message = self.first[(level, template)]
            if len(message) > WIDTH:
                message = message[: WIDTH - 3] + "..."
            times = f"{count:,}x " if count > 1 else ""
            lines.append(f"  {times}{level}: {message}")
        if len(self.counts) > SHOWN:
            lines.append(f"  ... and {len(self.counts) - SHOWN} other kinds of warnings")
        return lines


def keep_warnings(crawler: Crawler) -> KeptWarnings:
    """Start keeping the crawl's warnings (once per crawler; until ``release``), the
    expected network failures among them said in one line."""
    in_one_line()
    crawl = compat.kept_of_crawl(crawler)
    kept: KeptWarnings | None = crawl.get("warnings")
    if kept is None:
        kept = crawl["warnings"] = KeptWarnings()
        logging.getLogger().addHandler(kept)
    return kept


def release(crawler: Crawler) -> list[str]:
    """The summary's lines for the crawl's warnings; stops keeping them."""
    kept: KeptWarnings | None = compat.kept_of_crawl(crawler).pop("warnings", None)
    if kept is None:
        return []
    logging.getLogger().removeHandler(kept)
    return kept.lines()
