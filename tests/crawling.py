"""Run whole crawls in-process, against loopback servers, and return what they did."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy import settings as project_settings
from increcrawl_scrapy import stats
from increcrawl_scrapy.spiders.incremental import IncrementalSpider

KEY = "test-key-0123456789"


@dataclass
class CrawlResult:
    items: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    log: list[str] = field(default_factory=list)

    def changes(self, kind: str) -> set[str]:
        return {item["url"] for item in self.items if item.get("change") == kind}


class _Capture(logging.Handler):
    def __init__(self, sink: list[str]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(self.format(record))


#: Crawls capturing the root logger now, and its level before the first of them.
_DEBUG_CAPTURES: list[int] = [0, logging.WARNING]


@contextmanager
def _root_at_debug(handler: logging.Handler) -> Iterator[None]:
    """The root logger at DEBUG, *handler* on it, while the crawl runs. Crawls run
    at once (gatherResults) overlap: only the last to end restores the level the
    first found, or the second would restore the first's DEBUG, left for every
    later test in the process (whose log capture then keeps every response)."""
    root = logging.getLogger()
    if _DEBUG_CAPTURES[0] == 0:
        _DEBUG_CAPTURES[1] = root.level
    _DEBUG_CAPTURES[0] += 1
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        _DEBUG_CAPTURES[0] -= 1
        if _DEBUG_CAPTURES[0] == 0:
            root.setLevel(_DEBUG_CAPTURES[1])


def crawl_settings(db: str, clock: Any, api: Any = None, **extra: Any) -> dict[str, Any]:
    values = {
        name: getattr(project_settings, name) for name in dir(project_settings) if name.isupper()
    }
    values.update(
        {
            "INCRECRAWL_DB": db,
            "INCRECRAWL_CLOCK": clock,
            "LOG_LEVEL": "DEBUG",
            "TELNETCONSOLE_ENABLED": False,
            "GEONODE_BATCH_POLL_INTERVAL": 0.05,
            "GEONODE_BACKOFF_BASE": 0.05,
            "GEONODE_BACKOFF_MAX": 0.5,
            "RETRY_TIMES": 1,
        }
    )
    if api is not None:
        values.update({"GEONODE_API_URL": api.url, "GEONODE_API_KEY": KEY})
    else:
        values["INCRECRAWL_FETCHER"] = "direct"
    values.update(extra)
    return values


def add_on(db: str, clock: Any, **more: Any) -> dict[str, Any]:
    """A project's settings with the add-on, as the docs give them (skipping on)."""
    return {
        "ADDONS": {"increcrawl_scrapy.Addon": 300},
        "INCRECRAWL_DB": db,
        "INCRECRAWL_CLOCK": clock,
        "INCRECRAWL_SKIP_NOT_DUE": True,
        "TELNETCONSOLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        **more,
    }


async def run_crawl(
    settings: dict[str, Any],
    *,
    spider_class: type = IncrementalSpider,
    hooks: Mapping[Any, Callable[..., Any]] | None = None,
    **spider_args: Any,
) -> CrawlResult:
    """*hooks*: more handlers of the crawler's signals (signal -> handler)."""
    result = CrawlResult()
    crawler = Crawler(spider_class, Settings(settings))
    for signal, handler in (hooks or {}).items():
        crawler.signals.connect(handler, signal=signal)

    def scraped(item: Any) -> None:
        result.items.append(dict(item))

    def closed(reason: str) -> None:
        result.reason = reason

    crawler.signals.connect(scraped, signal=signals.item_scraped)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    handler = _Capture(result.log)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    with _root_at_debug(handler):
        await crawler.crawl(**spider_args)
    result.stats = dict(crawler.stats.get_stats()) if crawler.stats else {}
    # Failures inside signal handlers are only logged: none may happen.
    assert not [line for line in result.log if "Error caught on signal handler" in line]
    # Every stats key of ours is one the stats module names (and docs/reference/stats.md documents).
    ours = [key for key in result.stats if key.startswith(("increcrawl/", "geonode/"))]
    assert all(stats.is_known(key) for key in ours), sorted(ours)
    return result


class PagesSpider(scrapy.Spider):
    """A project's spider, for the add-on: an item of each page (its URL and title),
    its links followed (the add-on tells the page's own from the site's)."""

    name = "pages"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}
        yield from response.follow_all(css="a")
