"""Differences between the Scrapy versions we support, as named capabilities, and
the import paths earlier versions of this package had.

Scrapy 2.14 added awaitable engine methods (``download_async``,
``close_spider_async``) and deprecated the Deferred ones; 2.13 has only those.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial
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


_asyncio_seen = False  # once available, for the rest of the process (its reactor's)


def component(
    crawler: Crawler, getter: Callable[[type[_T]], _T | None], cls: type[_T]
) -> _T | None:
    """The crawl's instance of *cls* by Scrapy's public accessor *getter*
    (``crawler.get_spider_middleware``, ``get_extension``...), or None, also while
    its manager does not exist yet: Scrapy raises RuntimeError then (2.19 already
    on reading ``crawler.engine``, 2.13 in the accessor)."""
    try:
        return getter(cls)
    except RuntimeError:
        return None


#: The crawler's attribute holding what this package keeps for one crawl.
_KEPT = "_increcrawl_kept"


def of_crawl(crawler: Crawler, name: str, make: Callable[[], _T]) -> _T:
    """The crawl's one *name*, made by *make* at the first ask. Kept on the crawler
    itself, so it goes with its crawler: a registry by crawler (a WeakKeyDictionary)
    whose values refer to their crawler keeps every finished crawler alive."""
    kept: dict[str, Any] = crawler.__dict__.setdefault(_KEPT, {})
    if name not in kept:
        kept[name] = make()
    return kept[name]


def kept_of_crawl(crawler: Crawler) -> dict[str, Any]:
    """What ``of_crawl`` keeps for *crawler*, to look into or drop from."""
    kept: dict[str, Any] = crawler.__dict__.setdefault(_KEPT, {})
    return kept


def connect_for_crawl(crawler: Crawler, receiver: Callable[..., Any], signal: object) -> None:
    """*receiver* connected to *signal* for as long as its crawler lives: held by the
    crawler, connected weakly. PyDispatcher's registry is the process's: a receiver
    connected with ``weak=False`` is never let go, nor its crawler with it."""
    receivers: list[Callable[..., Any]] = of_crawl(crawler, "receivers", list)
    receivers.append(receiver)
    crawler.signals.connect(receiver, signal=signal)


def asyncio_available() -> bool:
    """Whether asyncio code (the Geonode client) can run in this crawl."""
    global _asyncio_seen
    _asyncio_seen = _asyncio_seen or bool(is_asyncio_available())
    return _asyncio_seen


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


def _engine_slot(crawler: Crawler) -> Any:
    """The engine's slot of the open spider (no public way; None once it closed), as
    Scrapy 2.13 and later name it."""
    return getattr(crawler.engine, "_slot", None)


def busy_besides(crawler: Crawler, request: Any = None) -> bool:
    """Whether the crawl has work besides *request* (whose response is in the spider
    now): requests scheduled or downloading, other responses in the spider. Scrapy's
    ``spider_is_idle`` counts that response too. (Its start requests are done: the
    crawl went idle before.)"""
    engine, slot = crawler.engine, _engine_slot(crawler)
    if engine is None or slot is None:
        return False
    scraping = getattr(getattr(engine.scraper, "slot", None), "active", ())
    downloading = getattr(engine.downloader, "active", ())
    return (
        any(other is not request for other in scraping)
        or any(other is not request for other in downloading)
        or slot.scheduler.has_pending_requests()
    )


def wake_engine(crawler: Crawler) -> None:
    """Have the engine look now whether the crawl is done, as it does after each
    response, rather than at its next heartbeat (every 5 s): for work that kept an
    idle crawl open (``DontCloseSpider``) and ended with nothing to schedule. Through
    the engine's slot: else the heartbeat does."""
    nextcall = getattr(_engine_slot(crawler), "nextcall", None)
    if nextcall is not None:
        nextcall.schedule()


def engine_closing(crawler: Crawler) -> bool:
    """Whether the crawl is closing (``CLOSESPIDER_*``, a shutdown, any reason):
    the engine then waits for the requests in progress, sends no more, and no
    ``spider_idle`` comes. No signal says it before the pipelines close: the slot's
    ``closing``, set as the close starts."""
    return bool(getattr(_engine_slot(crawler), "closing", None))


def given_encoding(response: Any) -> str | None:
    """The encoding *response* was made with (``encoding=``), if any: its text is
    decoded by it whatever the body says. No public way: ``encoding`` is the one
    finally used, inferred from the body when nothing declares one (a decode)."""
    return getattr(response, "_encoding", None)


async def in_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Run CPU-bound or blocking work off the reactor thread, with any reactor."""
    return await maybe_deferred_to_future(threads.deferToThread(function, *args))


_content_pool: Any = None
_content_executor: Any = None


async def in_content_thread(function: Callable[..., _T], *args: Any) -> _T:
    """Run a page's content work (parsing, extraction, conversion) on the one thread
    kept for it: lxml and trafilatura keep per-thread state (10 threads took 3x the
    memory of one), and the GIL makes more threads no faster. With asyncio, handed
    over by the event loop itself (a Twisted pool's Deferred, turned into a future,
    cost the reactor's thread a tenth of its time per page)."""
    if asyncio_available():
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(_executor(), partial(function, *args))
    return await maybe_deferred_to_future(
        threads.deferToThreadPool(_reactor(), _pool(), function, *args)
    )


def _executor() -> Any:
    global _content_executor
    if _content_executor is None:
        _content_executor = ThreadPoolExecutor(1, thread_name_prefix="increcrawl-content")
        _reactor().addSystemEventTrigger("during", "shutdown", _stop_content_pool)
    return _content_executor


def _pool() -> Any:
    global _content_pool
    if _content_pool is None:
        from twisted.python.threadpool import ThreadPool

        _content_pool = ThreadPool(minthreads=0, maxthreads=1, name="increcrawl-content")
        _content_pool.start()
        _reactor().addSystemEventTrigger("during", "shutdown", _stop_content_pool)
    return _content_pool


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def _stop_content_pool() -> None:
    global _content_pool, _content_executor
    pool, _content_pool = _content_pool, None
    if pool is not None:
        pool.stop()
    executor, _content_executor = _content_executor, None
    if executor is not None:
        executor.shutdown(wait=True)


async def sleep(seconds: float) -> None:
    """Wait without blocking the reactor, with any reactor."""
    from twisted.internet import reactor, task

    await maybe_deferred_to_future(task.deferLater(reactor, seconds))


#: Modules of 0.2.0 that moved into the package's wings, old name -> new name, both
#: relative to ``increcrawl_scrapy``. The old names still import, with a warning; a
#: path no release had is not kept (tests/package/test_layout.py).
MOVED: dict[str, str] = {
    "fingerprint": "content.fingerprint",
    "item_fingerprint": "content.item_fingerprint",
    "noise": "content.noise",
    "markdown": "content.markdown",
    "schedule": "schedule.policy",
    "estimator": "schedule.estimator",
    "rows": "schedule.rows",
    "discovery": "discovery.parse",
    "sitemap_walk": "discovery.walk",
    "url_rules": "discovery.url_rules",
    "spiders.discoverer": "discovery.sources",
    "spiders.after_discovery": "discovery.after",
    "setting_reads": "config.reads",
    "unknown_settings": "config.unknown",
    "shared_state": "crawl.shared_state",
    "delivery": "crawl.delivery",
    "page_groups": "pages.middleware",
    "page_memory": "pages.memory",
    "run_summary": "crawl.run_summary",
    "progress": "spiders.progress",
    "cluster_share": "spiders.cluster_share",
    "tokens": "spiders.tokens",
    "skip_not_due": "pages.skip_not_due",
    "state.database": "state.sqlite.database",
    "state.schema": "state.sqlite.schema",
    "state.pg_database": "state.postgres.database",
    "state.pg_schema": "state.postgres.schema",
    "state.leases": "state.postgres.leases",
    "state.workers": "state.postgres.workers",
    "state.rekey": "state.upkeep",
    "state.refingerprint": "state.upkeep",
}
_PACKAGE = "increcrawl_scrapy."


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module it became, with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith(_PACKAGE) or fullname[len(_PACKAGE) :] not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = _PACKAGE + MOVED[spec.name[len(_PACKAGE) :]]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes in a later version",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        pass  # the new module ran when it was imported


def moved_attribute(package: str, name: str) -> Any:
    """An old module's attribute asked of the package that took its name
    (``increcrawl_scrapy.discovery.iter_sitemap``, once a module's, now ``.parse``'s)."""
    new = _PACKAGE + MOVED[package[len(_PACKAGE) :]]
    module = importlib.import_module(new)
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    warnings.warn(f"{package}.{name} moved to {new}", DeprecationWarning, stacklevel=2)
    return getattr(module, name)


def keep_old_import_paths() -> None:
    """Install the finder of :data:`MOVED` (once)."""
    if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(_MovedModules())
