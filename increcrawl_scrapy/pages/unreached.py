"""Pages a project's crawl no longer reaches: a page deleted from a link-crawled site
takes its links with it, so no request for it is made again and its 404 is never
seen. Once the crawl is idle, a page with state that no response of this run (nor
a start request) led to, and that the seed's last ``INCRECRAWL_UNREACHED_RUNS``
runs did not fetch, is asked for directly when it is due since the first of them,
or, whatever its schedule, when its last fetch is ``UNREACHED_AGE`` (5 days) old:
with daily runs a deleted page is gone within 6 days. A link made again from a
skipped page's memory (``skip_not_due.py``) counts as reaching the page it leads to
when the skipped page was fetched within ``UNREACHED_AGE``: it listed the page that
recently, and listings are read again within that age (``listings.py``), so a
deleted page drops out of every recent memory within it and is then checked. A
link from an older memory shows nothing of the page (it may have been deleted
since): it does not count, and the run summary does not count such a page as
reached; a page only such links lead to is so fetched every 5 days at least.

A check asks as the crawl asked: the request that reached the page, kept in its
memory (``pages/memory.py`` ``kept_request``: method, headers such as an API key,
body, cookies, meta), is sent again, its redirects not followed, so that its
answer is the URL asked's:

- 2xx: the page is seen, unchanged as far as its state can tell (its content is
  not compared), checked again once it goes unreached and unfetched as long again;
- 404 or 410: gone (``pages/gone.py``: its items are delivered ``gone``, once);
- a permanent redirect (301, 308) within the site (the same host, ``www.`` or not,
  http or https): moved, gone from its URL the same way (its items delivered
  ``gone`` once, the row recorded as a 410); the target is a page of its own,
  reached as the site links it;
- anything else (401, 403, 5xx, a temporary or off-site redirect, robots.txt's
  refusal, a download error): nothing is known, and the row is recorded as a site
  failure: it goes behind the rows never checked (the checks are taken by
  ``error_streak`` first), so such rows never take every check of a run.

A row stored before the request was kept (an older version) is asked with a bare
GET of its URL: its answer shows the page alive, but a 404 to a request stripped of
what the crawl sent (an API that hides what a missing key may not see) proves
nothing, so such a 404 is a failure, not ``gone``; the page keeps its request from
its next fetch on. ``scrapy increcrawl status`` names the due pages not reached."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from scrapy import Request, signals
from scrapy.exceptions import DontCloseSpider
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.crawl.shared_state import CrawlState, crawl_state
from increcrawl_scrapy.pages.gone import GONE_MEMORY
from increcrawl_scrapy.pages.kept_requests import request_of
from increcrawl_scrapy.pages.memory import unpack
from increcrawl_scrapy.pages.page import same_page
from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.python.failure import Failure

logger = logging.getLogger(__name__)

#: The meta key of a direct check's request.
UNREACHED = "increcrawl_unreached"
#: A check that could not ask as the crawl asked (no kept request): a bare GET.
BARE = "increcrawl_unreached_bare"
#: The statuses the crawl's callback takes as the page's answer ("all": every one).
HANDLED = "increcrawl_unreached_handled"
#: Pages checked directly in one run, at most.
MAX_CHECKS = 1_000
#: A page no response led to is checked once it is due, or not fetched for this
#: long whatever its schedule (seconds): with daily runs, a page deleted is gone
#: within 6 days, and a page only older replays lead to is fetched that often at
#: least; a replay from a page fetched within it reaches its page (listings.py).
UNREACHED_AGE = 5 * 86_400.0
#: The statuses a check gets as they are, the redirect not followed.
REDIRECTS = (301, 302, 303, 307, 308)
#: A redirect that says the page moved for good.
PERMANENT = frozenset({301, 308})
SEEN, GONE, MOVED, FAILED = "seen", "gone", "moved", "failed"


class UnreachedPages:
    """Once a crawl, when it is idle: the pages its last runs did not reach (the
    crawl state's ``linked``: the canonical URLs a response of this run or a start
    request led to, ``PageItemsMiddleware`` fills it)."""

    def __init__(self, crawler: Crawler, runs: int) -> None:
        self.crawler = crawler
        self.runs = runs
        self.asked = False
        self.checking = False  # its query running: the state must stay open
        crawler.signals.connect(self.idle, signal=signals.spider_idle)

    def idle(self) -> None:
        if self.crawler.engine is None:
            return
        if not self.asked:
            self.asked = self.checking = True
            deferred_from_coro(self._check())
        if self.checking:  # another look meanwhile (a held item's release) waits too
            raise DontCloseSpider  # the next idle, once the checks are in, ends the crawl

    async def _check(self) -> None:
        try:
            await self._request_unreached()
        finally:
            self.checking = False
            compat.wake_engine(self.crawler)  # whatever it found: not at the heartbeat

    async def _request_unreached(self) -> None:
        try:
            state = crawl_state(self.crawler)
        except StateLockedError:
            return
        reached = frozenset(state.linked | state.replay_linked)
        # For the run summary: pages skipped that no response nor a recent replay
        # showed are not reached; those only recent replays showed are counted apart.
        replayed_only = len(state.replay_skipped - reached)
        stats.inc(self.crawler.stats, stats.UNREACHED_REPLAYED, replayed_only)
        recent_only = len(state.replay_skipped & state.replay_linked - state.linked)
        stats.inc(self.crawler.stats, stats.UNREACHED_RECENT, recent_only)
        aged = config_for(self.crawler).clock() - UNREACHED_AGE
        if compat.engine_closing(self.crawler):
            return  # a bounded run's close: the next run asks, its state stays open
        try:
            checks = await compat.in_thread(_checks, state, self.runs, reached, aged)
        except Exception:
            if state.store.closed:  # the crawl closed meanwhile (CLOSESPIDER_*)
                return
            raise
        if not checks or self.crawler.engine is None or compat.engine_closing(self.crawler):
            return
        requests = [self._request(url, memory) for url, memory in checks]
        bare = sum(1 for request in requests if request.meta.get(BARE))
        logger.info(
            "%d pages with state were not reached by the last %d runs (no response "
            "leads to them any more): asked directly as the crawl asked (%d kept no "
            "request of the crawl: their 404 is not taken for gone)",
            len(requests),
            self.runs,
            bare,
        )
        for request in requests:
            self.crawler.engine.crawl(request)
        stats.inc(self.crawler.stats, stats.UNREACHED_CHECKED, len(requests))

    def _request(self, url: str, blob: bytes | None) -> Request:
        """The check of *url*: its kept request (a bare GET without one), sent once,
        uncached, its redirects not followed. Its memory goes along for its 404
        (``pages/gone.py``: read ahead, as on a shared state)."""
        meta: dict[str, Any] = {
            UNREACHED: True,
            GONE_MEMORY: blob,
            "increcrawl_always": True,
            "dont_cache": True,
            "dont_redirect": True,
        }
        memory = unpack(blob)
        kept = memory.request if memory is not None else None
        if kept is not None:
            try:
                asked = request_of(kept, self.crawler.spider)
            except (ValueError, KeyError, TypeError):
                asked = None
            # The page's request, however it spelt the page's URL (the row keeps the
            # first spelling, the memory the last).
            if asked is not None and same_page(self.crawler, asked.url, url):
                meta.update(self._statuses(asked.meta))
                return asked.replace(
                    callback=answered,
                    errback=self.failed,
                    meta={**asked.meta, **meta},
                    dont_filter=True,
                )
        meta.update(self._statuses({}))
        meta[BARE] = True
        return Request(url, callback=answered, errback=self.failed, meta=meta, dont_filter=True)

    def _statuses(self, kept: dict[str, Any]) -> dict[str, Any]:
        """The check's statuses: the redirects (not followed, the answer is the URL
        asked's), and those the crawl's callback takes as the page's (the request's,
        the spider's, ``HTTPERROR_ALLOWED_CODES``; all of them): its answer then, not a
        deletion (``answer_of``), as the crawl's own path leaves them to the spider."""
        spider, settings = self.crawler.spider, self.crawler.settings
        every = bool(
            kept.get("handle_httpstatus_all")
            or getattr(spider, "handle_httpstatus_all", False)
            or settings.getbool("HTTPERROR_ALLOW_ALL")
        )
        handled = {
            *(kept.get("handle_httpstatus_list") or ()),
            *(getattr(spider, "handle_httpstatus_list", None) or ()),
            *settings.getlist("HTTPERROR_ALLOWED_CODES"),
        }
        handled = {int(status) for status in handled}
        return {
            "handle_httpstatus_list": sorted({*REDIRECTS, *handled}),
            HANDLED: "all" if every else sorted(handled),
        }

    def failed(self, failure: Failure) -> list[Any]:
        """A check without an answer (robots.txt's refusal, a download error): the
        row goes behind the others. An HTTP error's response is told apart by
        ``PageItemsMiddleware``, which gets it with this errback's output."""
        if not failure.check(HttpError):
            failed(self.crawler, failure.request.url, None)  # type: ignore[attr-defined]
        return []


def _checks(
    state: CrawlState, runs: int, reached: frozenset[str], aged: float
) -> list[tuple[str, Any]]:
    """The pages to check and their memories (read off the reactor's thread; on a
    shared state their rows loaded, for their answers)."""
    store = state.store
    urls = store.unreached(state.seed, runs, MAX_CHECKS, reached, aged)
    if store.shared and urls:
        store.load([store.normalize(url) for url in urls])
    return [(url, store.memory(url)) for url in urls]


def answered(response: Response) -> list[Any]:
    """A direct check that answered: ``PageItemsMiddleware`` tells what it means."""
    return []


def answer_of(crawler: Crawler, response: Response) -> str:
    """What a check's *response* says of the URL asked (the module's docstring)."""
    status = response.status
    if 200 <= status < 300:
        return SEEN
    if status in GONE_STATUSES:
        handled = response.meta.get(HANDLED, ())
        if handled == "all" or status in handled:
            return SEEN  # the spider takes this answer for the page (it did before)
        return FAILED if response.meta.get(BARE) else GONE
    if status in PERMANENT and _within_site(crawler, response):
        return MOVED
    return FAILED


def _within_site(crawler: Crawler, response: Response) -> bool:
    """A permanent redirect to another page of the site: not to the page's own URL
    spelt otherwise (a slash, a tracking parameter), which proves nothing."""
    location = response.headers.get("Location")
    if not location:
        return False
    target = urljoin(response.url, location.decode("latin-1"))
    if target == response.url or same_page(crawler, target, response.url):
        return False
    return _host(target) == _host(response.url)


def _host(url: str) -> str:
    host = (urlsplit(url).hostname or "").lower()
    return host[4:] if host.startswith("www.") else host


async def seen(crawler: Crawler, response: Response) -> None:
    """A directly checked page that answered: seen, unchanged as far as its state
    can tell (its content not compared), its next check after its interval."""
    try:
        state = crawl_state(crawler)
        key = state.store.normalize(response.url)
    except (StateLockedError, ValueError):
        return
    if state.store.shared and not state.store.known(key):
        await compat.in_thread(state.store.load, [key])
    state.store.record(response.url, 304, seed=state.seed, key=key)
    stats.inc(crawler.stats, stats.UNCHANGED)


def failed(crawler: Crawler, url: str, status: int | None) -> None:
    """A check that told nothing (*status*, or None without an answer): recorded
    as a site failure, so the row goes behind the rows never checked. A 404 or 410
    recorded as a status would make it gone: it is recorded without one."""
    try:
        state = crawl_state(crawler)
        key = state.store.normalize(url)
    except (StateLockedError, ValueError):
        return
    if state.store.shared and not state.store.known(key):
        return  # loaded with the checks; never a read on the reactor's thread
    if status in GONE_STATUSES:
        status = None
    state.store.record(url, status, seed=state.seed, key=key, site_failure=True)
