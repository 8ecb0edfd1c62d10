"""``LOG_FORMATTER`` of the project: items named, not dumped.

Scrapy logs every scraped or dropped item whole at DEBUG; a page's item carries its
markdown (about 4.8 KB a page, 240 MB for a 50,000-page first run). Here an item is
its label and its URL, whatever the log level."""

from __future__ import annotations

from typing import Any

from itemadapter import ItemAdapter, is_item
from scrapy.logformatter import LogFormatter, LogFormatterResult


def item_summary(item: Any) -> str:
    """``item {change} {url}``: what a log line needs of an item."""
    if not is_item(item):
        return type(item).__name__
    adapter = ItemAdapter(item)
    parts = [str(adapter.get(name)) for name in ("change", "url") if adapter.get(name)]
    return "item " + (" ".join(parts) or f"with fields {', '.join(sorted(adapter.keys()))}")


class ItemSummaryLogFormatter(LogFormatter):
    def scraped(self, item: Any, *args: Any, **kwargs: Any) -> LogFormatterResult:
        return _summarised(super().scraped(item, *args, **kwargs), item)

    def dropped(self, item: Any, *args: Any, **kwargs: Any) -> LogFormatterResult:
        return _summarised(super().dropped(item, *args, **kwargs), item)

    def item_error(self, item: Any, *args: Any, **kwargs: Any) -> LogFormatterResult:
        return _summarised(super().item_error(item, *args, **kwargs), item)


class _Summary:
    """An item's summary, made only when a log line is written (most runs log
    items at DEBUG, below their level: no summary is made for them)."""

    __slots__ = ("item",)

    def __init__(self, item: Any) -> None:
        self.item = item

    def __str__(self) -> str:
        return item_summary(self.item)


def _summarised(result: LogFormatterResult, item: Any) -> LogFormatterResult:
    arguments = result.get("args")
    if isinstance(arguments, dict) and "item" in arguments:
        result["args"] = {**arguments, "item": _Summary(item)}
    return result
