"""A page's text taken in worker processes (``INCRECRAWL_CONTENT_PROCESSES``), on the
machine's other cores, where the content thread shares the GIL with the reactor's.

A page's content work (the HTML5 parse, the main content, its markdown, the
fingerprint) costs about what the reactor's own work a page costs, and on a thread
the two take turns for the GIL. Here the pure work (a response's bytes in, its text
and fingerprint out) is shipped to a worker through its pipes (``pipe_pool.py``),
started once the crawl has taken :data:`START_AFTER` pages' texts on the thread (a
small crawl never starts one), and the thread goes on taking pages until the worker
has done its imports; the pool shuts down when the crawl closes. Texts and
fingerprints are the same as on the thread. With ``auto`` (the default), one worker
where the process may use two cores: a first run with ``<main>`` went from about 0.6x
to 0.77-1.01x ``SitemapSpider``'s rate, where trafilatura extracts to 0.74-0.78x
(``benchmarks/RESULTS.md``, #51).

A worker that dies (killed, out of memory, a crash in a parser) breaks the pool: the
pages it held are asked once more of a new one; the pages that one holds when it
breaks too fail (:class:`ContentWorkerLost`, site failures that back off, counted in
``increcrawl/pages/content_worker_lost``, kept due); the crawl goes on. Where no worker can
start (three pools in a row that never answered), or without asyncio, the content
thread takes the work.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.page_text import ContentOptions, PageText, UnusablePage
from increcrawl_scrapy.crawl.cpu_quota import quota_cores
from increcrawl_scrapy.crawl.pipe_pool import PipePool
from increcrawl_scrapy.crawl.response_text import response_text, with_print

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Pools in a row that broke before any answer: then the thread takes the work.
_STARTS = 3
#: Pages taken on the thread before the pool starts: a small crawl (a test, a small
#: site) never pays a worker's start (about a second of CPU: its imports).
START_AFTER = 64
#: What a worker imports before it says it is ready.
_IMPORTS = ("trafilatura", "increcrawl_scrapy.content.main", __name__)


class ContentWorkerLost(UnusablePage):
    """The content process ended while working on this page, twice: a site failure,
    counted and backed off like any unusable page, never a crash of the crawl."""

    stat = stats.CONTENT_WORKER_LOST
    kind = "content worker lost"


#: What a worker needs to make the response again: its class, URL, body,
#: Content-Type, the encoding it was given and its flags (``geonode``: an empty body
#: is the page's text, not an origin that sent nothing); the rest never decides its text.
Shipped = tuple[type[Response], str, bytes, bytes | None, str | None, list[str]]
#: Scrapy's classes, most specific first: a subclass of a user's ships as its base.
_KINDS = (HtmlResponse, XmlResponse, TextResponse, Response)


def shipped(response: Response) -> Shipped:
    kind = next(k for k in _KINDS if isinstance(response, k))
    encoding = compat.given_encoding(response) if kind is not Response else None
    content_type = response.headers.get("Content-Type")
    return kind, response.url, response.body, content_type, encoding, list(response.flags)


def shipped_text(
    fingerprint: bool, page: Shipped, options: ContentOptions
) -> tuple[PageText, str | None]:
    """In a worker: the text of a shipped page, made a response again (decoded as
    Scrapy decodes it), with its fingerprint when asked."""
    kind, url, body, content_type, encoding, flags = page
    headers = {"Content-Type": content_type} if content_type else None
    extra: dict[str, Any] = {"encoding": encoding} if encoding else {}
    response = kind(url, body=body, headers=headers, flags=flags, **extra)
    return with_print(fingerprint, response_text, response, options)


def available_cores() -> int:
    """The cores this process may run on (its affinity, where the system says),
    fewer where a CPU quota gives less time (``cpu_quota.py``)."""
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    quota = quota_cores()
    return cores if quota is None else max(1, min(cores, int(quota)))


class ContentProcesses:
    """One crawl's worker pool (``workers`` processes; 0: the content thread; None:
    ``auto``, decided once START_AFTER pages' texts were taken on the thread)."""

    def __init__(self, workers: int | None, crawler: Crawler | None = None) -> None:
        self.workers = workers
        self.crawler = crawler
        self._pool: PipePool | None = None
        self._unanswered_pools = 0  # broken in a row before any answer
        self._closed = False
        self._pages = 0  # asked of it so far
        self._taken = 0  # texts taken on the thread while ``auto`` is undecided

    @classmethod
    def of(cls, crawler: Crawler, workers: int | None) -> ContentProcesses:
        def make() -> ContentProcesses:
            made = cls(workers, crawler)
            compat.connect_for_crawl(crawler, made.close, signals.spider_closed)
            return made

        return compat.of_crawl(crawler, "content_processes", make)

    async def text_of(
        self, fingerprint: bool, response: Response, options: ContentOptions
    ) -> tuple[PageText, str | None]:
        """*response*'s text, and its fingerprint when asked (``with_print``)."""
        self._pages += 1
        if not self._worker_ready():
            found = await compat.in_content_thread(
                with_print, fingerprint, response_text, response, options
            )
            if self.workers is None:
                self._taken += 1
                # Decided as the texts are taken, not when a later page comes: pages
                # come faster (up to the backlog), and all of a crawl's could have come.
                if self._taken >= START_AFTER:
                    self.workers = self._chosen()
            return found
        page = shipped(response)
        for attempt in (1, 2):  # a pool broken by another page: once more, on a new one
            pool = self._started()
            try:
                work = pool.submit(shipped_text, fingerprint, page, options)
                found = await asyncio.wrap_future(work)
            except (BrokenProcessPool, asyncio.CancelledError) as exc:
                if isinstance(exc, asyncio.CancelledError) and self._pool is pool:
                    raise  # this page's own task was cancelled, not its pool
                # A pool shut down under it (broken by another page, or the crawl
                # closing) cancels the pages it had queued: asked again, not lost.
                self._broken(pool)
                if not self._in_use():  # no worker answers at all: the thread's
                    return await compat.in_content_thread(
                        with_print, fingerprint, response_text, response, options
                    )
                if attempt == 2:
                    raise ContentWorkerLost(f"the content process ended on it ({exc})") from None
            else:
                self._unanswered_pools = 0
                if self.crawler is not None:
                    stats.inc(self.crawler.stats, stats.CONTENT_IN_WORKERS)
                return found
        raise AssertionError("unreachable")

    def _worker_ready(self) -> bool:
        """Whether a worker takes this page: past the first pages, workers wanted, and
        one ready. Its start (imports: about a second) is not waited for: the thread
        takes the pages meanwhile."""
        if self._pages <= START_AFTER or not self._in_use():
            return False
        if self._pool is not None and self._pool.broken:
            self._broken(self._pool)  # broken before a page was shipped: at its start
            if not self._in_use():
                return False
        return self._started().ready

    def _in_use(self) -> bool:
        return (
            bool(self.workers)
            and not self._closed
            and self._unanswered_pools < _STARTS
            and compat.asyncio_available()
        )

    def _chosen(self) -> int:
        """``auto``'s choice once the first pages are taken: one worker where the
        process may use a second core, else the thread."""
        cores, asyncio = available_cores(), compat.asyncio_available()
        chosen = int(cores >= 2 and asyncio)  # workers are fed by asyncio's loop
        logger.info(
            "Pages' texts are taken %s after the first %d pages: %d core(s)%s "
            "(INCRECRAWL_CONTENT_PROCESSES = auto)",
            "in a worker process" if chosen else "on the content thread",
            self._taken,
            cores,
            "" if asyncio else ", not the asyncio reactor",
        )
        if self.crawler is not None and self.crawler.stats is not None:
            self.crawler.stats.set_value(stats.CONTENT_PROCESSES, chosen)
        return chosen

    def _started(self) -> PipePool:
        if self._pool is None:
            self._pool = PipePool(self.workers or 1, _IMPORTS)
            logger.info(
                "Pages' texts are taken in %d worker process(es) from page %d on",
                self.workers,
                self._pages,
            )
        return self._pool

    def _broken(self, pool: PipePool) -> None:
        if self._pool is not pool:
            return  # replaced already, by another page that met the break
        self._pool = None
        self._unanswered_pools += 1
        pool.shutdown(wait=False, cancel_futures=True)
        if not pool.failed_start:  # it said why already
            logger.warning("A content process ended; its pages are asked of a new one")
        if self._unanswered_pools >= _STARTS:
            logger.warning("No content process answers: pages' texts are taken on a thread")

    def close(self) -> Coroutine[Any, Any, None] | None:
        """Its pool shut down; the crawl closes once its workers have ended (at once
        when they hold nothing, a grace for a page in hand)."""
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is None:
            return None
        pool.shutdown(wait=False, cancel_futures=True)
        return pool.ended()
