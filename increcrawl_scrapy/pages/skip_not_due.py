"""``SkipNotDueMiddleware``: in an existing project, do not fetch what is not due.

Opt-in (``INCRECRAWL_SKIP_NOT_DUE = True``, or a spider attribute
``increcrawl_skip_not_due = True``). A request whose URL has state and produced items
before is skipped while it is not due (``increcrawl/skipped/not_due``); when it is
due it carries the stored validators (``If-None-Match`` / ``If-Modified-Since``), and
a 304 is recorded as unchanged without calling the spider.

Skipping never cuts the crawl: the requests the page's response produced last time
(kept in its memory, ``pages/memory.py``) are made again (``increcrawl/replayed``),
so pages reached only through it are still requested when they are due (a page
skipped for such a request only is reached if the skipped page was fetched within
``UNREACHED_AGE``, else no response showed it: ``pages/unreached.py``). A page
whose requests could not be kept (a callback that is not a spider method, meta that
is not plain data), or kept by no fetch yet, or that this spider cannot make again (a
callback renamed, another spider's page on the same state), is fetched whether due
or not. A start
request skipped says so in the log. Skipping never drops what Scrapy would send:
only the page's own GET stands for the page, a form posted to its URL is sent as
Scrapy sends it (``postbacks.py``); while a response is in hand, a request Scrapy
takes for the same one (its request fingerprint) is not sent again, unless it is
``dont_filter``. Pages that produced only requests (listings, pagination) have
state of their own and are skipped as any page (``listings.py``), read again within
``UNREACHED_AGE`` whatever their schedule, so new items are still found.
With Scrapy's HTTP cache on, the spider's requests neither read nor fill it, and
due pages with state are asked conditionally, skipping or not (``http_cache.py``).
``request.meta["increcrawl_always"] = True`` opts a request out (not of the cache's
bypass);
``-a increcrawl_reset=1`` makes every page of the spider due again.

The ``incremental`` spider queues only due pages itself: this middleware leaves it
alone.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.dupefilters import RFPDupeFilter
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.misc import load_object
from w3lib.url import canonicalize_url

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for, skips_not_due
from increcrawl_scrapy.crawl.shared_state import CrawlState, crawl_state
from increcrawl_scrapy.crawl.validators import conditions, header_of
from increcrawl_scrapy.pages import http_cache, item_callbacks, passed_data
from increcrawl_scrapy.pages.gone import GONE_MEMORY
from increcrawl_scrapy.pages.http_cache import is_cached
from increcrawl_scrapy.pages.kept_requests import request_of
from increcrawl_scrapy.pages.listings import (
    first_count,
    is_listing,
    overdue,
    recent,
    sets_cookies,
)
from increcrawl_scrapy.pages.memory import UNCHANGED, Memory, unpack
from increcrawl_scrapy.pages.postbacks import fingerprint, is_postback
from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.scope import is_incremental
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.schedule.rows import PageState

logger = logging.getLogger(__name__)

#: Before RobotsTxtMiddleware (100): a page not due costs nothing at all.
PRIORITY = 90
META_ALWAYS = "increcrawl_always"
_META_KEY = "increcrawl_conditional"  # the row a conditional request was sent for
_META_PAGE = "increcrawl_page"  # the row of a page with state, on a shared state
#: A request made again from a skipped page's memory: it shows nothing of the page
#: it leads to, unless the skipped page was fetched within UNREACHED_AGE
#: (``listings.py``; else a page it alone leads to is not reached: ``unreached.py``).
REPLAYED = "increcrawl_replayed"
NOT_DUE, NOT_MODIFIED = "not_due", "not_modified"
VALIDATORS_KEPT = 10_000


class SkipNotDueMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SkipNotDueMiddleware:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = config_for(crawler)
        self.start_skipped = 0  # start requests skipped (logged the first time)
        self.shared_said = False  # a page of another spider skipped (logged once)
        self.skipped: set[str] = set()  # pages skipped this run (counted once each)
        self.replayed_to: set[str] = set()  # the pages replays led to (the summary's)
        self.started = self.config.clock()  # the run's start: what it fetched is after
        #: Scrapy's duplicate filter drops a request seen already (not BaseDupeFilter's).
        dupefilter = load_object(crawler.settings["DUPEFILTER_CLASS"])
        self.deduplicates = isinstance(dupefilter, type) and issubclass(dupefilter, RFPDupeFilter)
        #: Scrapy's HTTP cache is on: it is bypassed (http_cache.py).
        self.cache = crawler.settings.getbool("HTTPCACHE_ENABLED")
        if self.cache:
            crawler.signals.connect(self._say_cache, signal=signals.spider_opened)
        crawler.signals.connect(self._opened, signal=signals.spider_opened)

    async def _opened(self) -> None:
        """The spider's item callbacks read before its first request is decided."""
        state = self._state() if self._active() else None
        if state is not None:
            await item_callbacks.load(self.crawler, state)

    def _embedded(self) -> bool:
        """A project's own spider (the incremental spider has its own queue)."""
        spider = self.crawler.spider
        return spider is not None and not is_incremental(spider)

    def _active(self) -> bool:
        """Skipping the pages not due."""
        return self._embedded() and skips_not_due(self.crawler)

    def _asking(self) -> bool:
        """Asking pages with state conditionally: when skipping, and in place of
        Scrapy's HTTP cache (``http_cache.py``)."""
        return self._active() or (self.cache and self._embedded())

    def _say_cache(self) -> None:
        if self._embedded():
            http_cache.say(self.crawler, self)

    def process_request(self, request: Request, spider: Spider | None = None) -> Any:
        if self.cache and self._embedded():
            http_cache.bypass(request)
        if not self._asking() or request.meta.get(META_ALWAYS):
            return None
        passed_data.stamp(request)  # for the page's memory (``_decide`` compares it)
        state = self._state()
        if state is None:
            return None
        skipping = self._active()
        if (
            skipping
            and state.in_hand
            and self.deduplicates  # else Scrapy sends it again: so do we
            and not request.dont_filter  # Scrapy sends it again: so do we
            and fingerprint(self.crawler, request) in state.in_hand
        ):
            # Not counted as skipped: the page is the one fetched just now.
            raise IgnoreRequest("fetched just now (increcrawl)")
        if is_postback(request):
            return None  # not its URL's page: sent as Scrapy sends it (postbacks.py)
        if state.store.shared:
            try:
                key = state.store.normalize(request.url)
            except ValueError:
                return None  # not a page URL
            return self._after_loading(request, state, key)
        page = self._page(request, state)
        if page is not None:
            self._decide(request, page, unpack(state.store.memory(request.url)), skipping)
        return None

    async def _after_loading(self, request: Request, state: CrawlState, key: str) -> None:
        """The same on a shared state: rows and memories read off the reactor's thread."""
        if not state.store.known(key):
            await compat.in_thread(state.store.load, [key])
        page = self._page(request, state)
        if page is not None:
            request.meta[_META_PAGE] = key  # a 404 of it is read ahead (_read_ahead)
            memory = unpack(await compat.in_thread(state.store.memory, request.url))
            self._decide(request, page, memory, self._active())

    def _decide(
        self, request: Request, page: PageState, memory: Memory | None, skipping: bool
    ) -> None:
        """Skip the request while its page is not due (*skipping*), once the requests
        its page led to are made again; ask a due one conditionally. A page without
        kept requests is fetched whole (skipping it, or a 304, could cut the crawl),
        as is one whose requests this spider cannot make again (``_replayable``)."""
        if memory is None or memory.requests is None or not self._replayable(page, memory):
            return
        passed_data.remember(memory.passed, request)  # the other sources' kept too
        if passed_data.mismatch(memory.passed, request):
            return  # it passes on other data than its last fetch's: part of its item
        now = self.config.clock()
        this_run = page.last_fetched is not None and page.last_fetched >= self.started
        if skipping and this_run and is_listing(memory):
            # A listing asked again as Scrapy asks (after a login, its links may be
            # others): fetched whole, its latest version recorded, counted once.
            return
        if (
            skipping
            and page.next_check > now
            and not overdue(self.crawler, page, memory, now)
            and not self._item_listing(request, memory)
        ):
            if this_run:
                # Another URL of a page this run fetched (``/`` and ``/index.html``):
                # its requests were made then. Not a page skipped: the run summary
                # counts every page it reached once.
                raise IgnoreRequest("fetched by this run already (increcrawl)")
            self._skip(request, page, memory)
        headers = conditions(page)
        if headers:
            for name, value in headers.items():
                request.headers.setdefault(name, value)
            request.meta[_META_KEY] = page.normalized_url

    def _item_listing(self, request: Request, memory: Memory) -> bool:
        """A listing of a callback that yields items (an empty category page): its
        items may be back, it is fetched (``item_callbacks.py``)."""
        state = self._state()
        return (
            state is not None and is_listing(memory) and item_callbacks.yields_items(request, state)
        )

    def _replayable(self, page: PageState, memory: Memory) -> bool:
        """Whether this spider can make each of *memory*'s requests again: not when
        they name a callback it has not (another spider's page on the same state, a
        callback renamed since), so the page is fetched, not skipped for nothing; nor
        a listing another spider of the project recorded (its seed), whose requests
        are that spider's whatever their callbacks are named."""
        state = self._state()
        if is_listing(memory) and state is not None and page.seed != state.seed:
            return False
        for data in memory.requests or ():
            try:
                request_of(data, self.crawler.spider)
            except (ValueError, KeyError, TypeError):
                return False
        return True

    def _page(self, request: Request, state: CrawlState) -> PageState | None:
        """The request's page, if it has produced items before."""
        try:
            page = state.store.get(request.url)
        except ValueError:
            return None  # not a page URL
        if page is None or not page.fetch_count:
            return None  # never produced items: a listing, or a new page
        return page

    def _skip(self, request: Request, page: PageState, memory: Memory) -> None:
        self._say_shared(page)
        replayed = self._replay(memory, reaching=recent(page, self.config.clock()))
        self._count_skipped(page.normalized_url)
        if request.meta.get(REPLAYED):
            state = self._state()
            if state is not None:
                state.replay_skipped.add(canonicalize_url(request.url))
        if request.meta.get("is_start_request"):
            self.start_skipped += 1
            if self.start_skipped == 1:
                logger.info(
                    "Start request %s is not due: not fetched, the %d requests it led "
                    "to last time are made instead (INCRECRAWL_SKIP_NOT_DUE)",
                    request.url,
                    replayed,
                )
        raise IgnoreRequest("not due (increcrawl)")

    def _say_shared(self, page: PageState) -> None:
        """A page another spider recorded, skipped: this spider delivers nothing of
        it until it is due (a state keeps one row a URL). Said once a crawl."""
        state = self._state()
        if state is None or page.seed == state.seed or self.shared_said:
            return
        self.shared_said = True
        logger.warning(
            "%s is a page of spider %r on this state (INCRECRAWL_DB): skipped while it is "
            "not due, so this spider delivers nothing of the pages the two share; give "
            "each spider its own INCRECRAWL_DB",
            page.url,
            page.seed,
        )

    def _count_skipped(self, key: str) -> None:
        if key not in self.skipped:  # a page, not each request of it
            self.skipped.add(key)
            stats.inc(self.crawler.stats, stats.SKIPPED, reason=NOT_DUE)

    def _replay(self, memory: Memory, shown: bool = False, reaching: bool = False) -> int:
        """Make the requests of *memory* again; how many could be. *shown*: the page
        answered 304, unchanged, so its links are still there (they reach their
        pages); else they are marked REPLAYED, and reach their pages if *reaching*
        (the page was fetched within UNREACHED_AGE: ``listings.py``)."""
        spider, engine = self.crawler.spider, self.crawler.engine
        assert engine is not None
        replayed = 0
        # Kept as Scrapy's spider middlewares left them (depth in meta); a limit
        # lowered since is DepthMiddleware's to apply, which a replay bypasses.
        limit = self.crawler.settings.getint("DEPTH_LIMIT")
        state = self._state() if shown or reaching else None
        linked = None if state is None else state.linked if shown else state.replay_linked
        for data in memory.requests or ():
            if limit and int((data.get("meta") or {}).get("depth", 0)) > limit:
                continue
            try:
                request = request_of(data, spider)
            except (ValueError, KeyError, TypeError):
                continue  # the spider no longer has its callback
            if not shown:
                request.meta[REPLAYED] = True
            if linked is not None:
                linked.add(canonicalize_url(request.url))
            engine.crawl(request)
            replayed += 1
            self.replayed_to.add(canonicalize_url(request.url))
        stats.inc(self.crawler.stats, stats.REPLAYED, replayed)
        if self.crawler.stats is not None and self.replayed_to:
            self.crawler.stats.set_value(stats.REPLAYED_PAGES, len(self.replayed_to))
        return replayed

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Any:
        key = request.meta.get(_META_KEY)
        gone = response.status in GONE_STATUSES and not is_incremental(self.crawler.spider)
        state = self._state() if key or gone or self._asking() else None
        if state is None:
            return response
        if key and response.status == 304:
            if state.store.shared:
                return self._not_modified_shared(request, response, state, key)
            memory = unpack(state.store.memory(request.url))
            self._not_modified(request, response, state, key, memory)
        gone = gone and not is_postback(request)  # a postback's 404 is not the page's
        if gone and state.store.shared:  # skipping or not, the page may be gone
            page_key = key or request.meta.get(_META_PAGE) or _key_of(state, request.url)
            if page_key:
                return self._read_ahead(request, response, state, page_key)
        if response.status == 200 and not is_postback(request) and not is_cached(response):
            etag, modified = header_of(response, "ETag"), header_of(response, "Last-Modified")
            if etag or modified:
                # For the pipeline: the validators of the page its items come from
                # (taken when they are recorded; a bounded number kept meanwhile).
                if len(state.validators) >= VALIDATORS_KEPT:
                    del state.validators[next(iter(state.validators))]
                state.validators[response.url] = (etag, modified)
        return response

    async def _not_modified_shared(
        self, request: Request, response: Response, state: CrawlState, key: str
    ) -> None:
        memory = unpack(await compat.in_thread(state.store.memory, request.url))
        self._not_modified(request, response, state, key, memory)

    async def _read_ahead(
        self, request: Request, response: Response, state: CrawlState, key: str
    ) -> Response:
        """A page that may be gone (``pages/gone.py``), on a shared state: its
        row and memory read off the reactor's thread before the response goes on."""
        store = state.store
        if not store.known(key):
            await compat.in_thread(store.load, [key])
        request.meta[GONE_MEMORY] = await compat.in_thread(store.memory, request.url)
        return response

    def _not_modified(
        self,
        request: Request,
        response: Response,
        state: CrawlState,
        key: str,
        memory: Memory | None,
    ) -> None:
        """A 304: unchanged, the callback not called, the page's requests made again
        (with the cookie it set, if any: a listing that sets one is fetched whenever
        asked from then on, ``listings.py``)."""
        kept = None
        if memory is not None and is_listing(memory) and sets_cookies(self.crawler, response):
            kept = dataclasses.replace(memory, requests=None).pack()
        state.store.record(request.url, 304, seed=state.seed, key=key, memory=kept)
        listing = is_listing(memory)
        if not listing or first_count(self.crawler, key):
            stats.inc(self.crawler.stats, stats.UNCHANGED)
            if listing:
                stats.inc(self.crawler.stats, stats.LISTINGS, change=UNCHANGED)
        stats.inc(self.crawler.stats, stats.SKIPPED, reason=NOT_MODIFIED)
        if memory is not None:
            self._replay(memory, shown=True)
        raise IgnoreRequest("not modified since the last fetch (increcrawl)")

    def _state(self) -> CrawlState | None:
        """The crawl's state; None while another crawl holds the database (the crawl
        is closing: logged once by ``crawl_state``)."""
        try:
            return crawl_state(self.crawler)
        except StateLockedError:
            return None


def _key_of(state: CrawlState, url: str) -> str | None:
    try:
        return state.store.normalize(url)
    except ValueError:
        return None  # not a page URL
