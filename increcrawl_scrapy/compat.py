"""Differences between the Scrapy versions we support, as named capabilities.

Scrapy 2.14 added awaitable engine methods (``download_async``,
``close_spider_async``) and deprecated the Deferred ones; 2.13 has only those.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.core.engine import ExecutionEngine
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import threads

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

_T = TypeVar("_T")

try:  # Scrapy >= 2.14, which can also run without a Twisted reactor
    from scrapy.utils.asyncio import is_asyncio_available
except ImportError:  # Scrapy 2.13
    from scrapy.utils.reactor import is_asyncio_reactor_installed as is_asyncio_available

#: ``ExecutionEngine.download_async`` / ``close_spider_async`` exist (Scrapy >= 2.14).
HAS_ASYNC_ENGINE_API = hasattr(ExecutionEngine, "download_async")


def asyncio_available() -> bool:
    """Whether asyncio code (the Geonode client) can run in this crawl."""
    return bool(is_asyncio_available())


async def download(crawler: Crawler, request: Request) -> Response:
    """Download *request* through the downloader middlewares, outside the scheduler."""
    assert crawler.engine is not None
    if HAS_ASYNC_ENGINE_API:
        return await crawler.engine.download_async(request)
    return await maybe_deferred_to_future(crawler.engine.download(request))


async def close_spider(crawler: Crawler, reason: str) -> None:
    assert crawler.engine is not None
    if HAS_ASYNC_ENGINE_API:
        await crawler.engine.close_spider_async(reason=reason)
    else:
        assert crawler.spider is not None
        await maybe_deferred_to_future(crawler.engine.close_spider(crawler.spider, reason))


async def in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Run CPU-bound or blocking work off the reactor thread, with any reactor."""
    return await maybe_deferred_to_future(threads.deferToThread(function, *args))


_content_pool: Any = None
_content_waiting = 0


def content_backlog() -> int:
    """Content jobs given to the content thread and not done yet."""
    return _content_waiting


async def in_content_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Run a page's content work (parsing, extraction, conversion) on the one thread
    kept for it: lxml and trafilatura keep per-thread state (10 threads took 3x the
    memory of one), and the GIL makes more threads no faster."""
    global _content_pool, _content_waiting
    from twisted.internet import reactor
    from twisted.python.threadpool import ThreadPool

    if _content_pool is None:
        _content_pool = ThreadPool(minthreads=0, maxthreads=1, name="increcrawl-content")
        _content_pool.start()
        reactor.addSystemEventTrigger("during", "shutdown", _stop_content_pool)  # type: ignore[arg-type]
    _content_waiting += 1
    try:
        return await maybe_deferred_to_future(
            threads.deferToThreadPool(reactor, _content_pool, function, *args)
        )
    finally:
        _content_waiting -= 1


def _stop_content_pool() -> None:
    global _content_pool
    pool, _content_pool = _content_pool, None
    if pool is not None:
        pool.stop()


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor, with any reactor."""
    from twisted.internet import reactor, task

    await maybe_deferred_to_future(task.deferLater(reactor, seconds))
