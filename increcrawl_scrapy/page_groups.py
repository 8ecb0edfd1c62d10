"""Several items from one page: the page's state follows all of them together.

``PageItemsMiddleware`` (a spider middleware) holds a response's items until its
callback is done, passing requests on at once, then tells the pipeline which items
share a page URL. The page's fingerprint is taken of all of them, so the page
changes when any of its items changed, appeared or disappeared, and its schedule
follows that, not each item in turn. With ``INCRECRAWL_ITEM_KEY`` (the fields that
identify an item within its page, e.g. ``sku``) each item also gets its own row
and its own ``change`` label; without it, the page's items share the page's label.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from itemadapter import ItemAdapter, is_item

from increcrawl_scrapy.config import IncrecrawlConfig
from increcrawl_scrapy.fingerprint import content_fingerprint
from increcrawl_scrapy.item_fingerprint import item_text

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.rows import Recorded

#: After Scrapy's own spider middlewares (they see what our callback yields first).
PRIORITY = 950


@dataclass
class PageGroup:
    url: str
    size: int
    text: str  # what the page's fingerprint is taken of
    recorded: Recorded | None = None  # the page's result, once its first item came


@dataclass
class Member:
    group: PageGroup
    item_key: str | None  # INCRECRAWL_ITEM_KEY's values, when set
    text: str = field(default="")  # the item's own canonical text (with a key)


_MEMBERS: WeakKeyDictionary[Crawler, dict[int, Member]] = WeakKeyDictionary()


def take(crawler: Crawler, item: Any) -> Member | None:
    """The group *item* belongs to, if its page yielded it with others (or keyed)."""
    members = _MEMBERS.get(crawler)
    return members.pop(id(item), None) if members else None


def peek(crawler: Crawler, item: Any) -> Member | None:
    """The same, left in place for ``take``."""
    members = _MEMBERS.get(crawler)
    return members.get(id(item)) if members else None


class PageItemsMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageItemsMiddleware:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = IncrecrawlConfig.from_settings(crawler.settings)
        self.members = _MEMBERS.setdefault(crawler, {})

    def _active(self) -> bool:
        spider = self.crawler.spider
        if spider is None:
            return False
        # The incremental spider's own items are one a page; its subclasses' are yours.
        return not hasattr(spider, "increcrawl_scope") or bool(getattr(spider, "page_rules", ()))

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterator[Any]:
        if not self._active():
            yield from result
            return
        items = []
        for output in result:
            if is_item(output):
                items.append(output)
            else:
                yield output  # requests go on at once
        yield from self._grouped(items)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        if not self._active():
            async for output in result:
                yield output
            return
        items = []
        async for output in result:
            if is_item(output):
                items.append(output)
            else:
                yield output
        for item in self._grouped(items):
            yield item

    def _grouped(self, items: list[Any]) -> list[Any]:
        by_page: dict[str, list[Any]] = defaultdict(list)
        for item in items:
            url = ItemAdapter(item).get(self.config.url_field)
            if isinstance(url, str) and url:
                by_page[url].append(item)
        keys = self.config.item_key
        skip = self.config.volatile_fields
        for url, group in by_page.items():
            if len(group) < 2 and not keys:
                continue  # one item, one page: as any item
            members: list[tuple[Any, str | None, str]]
            if keys:
                members = [(item, _key(item, keys), item_text(item, skip)) for item in group]
                patterns = self.config.volatile_patterns
                lines = sorted(
                    f"{key}\t{content_fingerprint(text, patterns)}" for _, key, text in members
                )
            else:
                members = [(item, None, "") for item in group]
                lines = sorted(item_text(item, skip) for item in group)
            page = PageGroup(url=url, size=len(group), text="\n".join(lines))
            for item, key, text in members:
                self.members[id(item)] = Member(page, key, text)
        return items


def _key(item: Any, fields: tuple[str, ...]) -> str:
    adapter = ItemAdapter(item)
    return "|".join(f"{name}={adapter.get(name)}" for name in fields)
