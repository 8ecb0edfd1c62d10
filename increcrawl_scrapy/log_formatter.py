"""``LOG_FORMATTER`` of the project: items named, not dumped.

Scrapy logs every scraped or dropped item whole at DEBUG; a page's item carries its
markdown (about 4.8 KB a page, 240 MB for a 50,000-page first run). Here an item is
its label and its URL, whatever the log level.

In a project of its own with the add-on, the project's items are logged as Scrapy
logs them; only the items the add-on itself does not deliver (``NotDelivered``:
unchanged, moved, aliases) are named instead of dumped (``NotDeliveredLogFormatter``,
set by the add-on where the project keeps Scrapy's formatter)."""

from __future__ import annotations

from typing import Any

from itemadapter import ItemAdapter, is_item
from scrapy.exceptions import DropItem
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


class NotDelivered(DropItem):
    """An item the state says not to deliver (unchanged, moved to another page, an
    alias, of a version not kept): no failure, logged at DEBUG by its name."""

    def __init__(self, message: str) -> None:
        super().__init__(message, log_level="DEBUG")


class NotDeliveredLogFormatter(LogFormatter):
    """Scrapy's formatter, but for the items the add-on does not deliver: a line
    each, not the whole item (two thirds of a later run's log were those)."""

    def dropped(
        self, item: Any, exception: BaseException, *args: Any, **kwargs: Any
    ) -> LogFormatterResult:
        result = super().dropped(item, exception, *args, **kwargs)
        if not isinstance(exception, NotDelivered):
            return result
        result["msg"] = "Dropped: %(exception)s (%(item)s)"  # one line
        return _summarised(result, item)


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
