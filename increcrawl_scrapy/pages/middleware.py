"""A response's items: the page's state follows all of them together.

``PageItemsMiddleware`` (a spider middleware) holds a response's items until its
callback is done, passing requests on at once, then tells the pipeline which page
each item belongs to: the one its URL field names, else the response it was scraped
from. The page's fingerprint is taken of all its items, so the page changes when any
of them changed, appeared or disappeared, and its schedule follows that, not each
item in turn. Its items are matched against the page's previous version
(``pages/memory.py``): each gets its own label (``new``, ``changed`` with
``changed_fields``, ``unchanged``), and an item gone from the page comes as an item
of its own (``gone``, with the fields that identified it), and so does each item of
a page that answers 404 or 410 (``pages/gone.py``); new and gone ones wait for the
run's other pages, where they may have moved (``pages/moved.py``). A page grouped
again in the same run (an item another listing lists too) is another version of
it, one item with the first: matched against the previous run's versions until
one of the run's says a change, else not delivered (``Page.again``), and the
page's memory keeps each version (``pages/memory.py``). With
``INCRECRAWL_ITEM_KEY`` (the fields that identify an item within its page, e.g.
``sku``) each item gets its own row instead. The response's own page also keeps
the request that reached it (sent again when no page leads to it any more:
``unreached.py``, whose answers are told apart here) and the requests it produced,
to be replayed when it is skipped (``skip_not_due.py``), whose URLs its fingerprint
covers too, and what its request passed on (``passed_data.py``). A response of
links only is a listing (``listings.py``)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from scrapy import Request, signals
from scrapy.exceptions import NotConfigured
from scrapy.http import TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from scrapy.utils.asyncgen import as_async_generator
from w3lib.url import canonicalize_url

from increcrawl_scrapy import compat
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.content.item_fingerprint import item_text
from increcrawl_scrapy.content.library_logs import follow_log_level
from increcrawl_scrapy.content.page_text import ContentFailed, ContentOptions, UnusablePage
from increcrawl_scrapy.crawl.response_text import links_failed, main_links
from increcrawl_scrapy.crawl.shared_state import CrawlState, crawl_state
from increcrawl_scrapy.pages.gone import TAKEN, gone_memory, gone_page, gone_prints
from increcrawl_scrapy.pages.http_cache import is_cached
from increcrawl_scrapy.pages.in_flight import InFlight
from increcrawl_scrapy.pages.kept_requests import kept_request, request_data
from increcrawl_scrapy.pages.keyed import KeyedSite, item_key, keyed_print
from increcrawl_scrapy.pages.listings import record_listing
from increcrawl_scrapy.pages.memory import (
    GONE,
    MAX_ITEMS,
    MAX_REQUESTS,
    ItemPrint,
    Memory,
    item_print,
    item_whole,
)
from increcrawl_scrapy.pages.moved import COMPLETE, RELEASE, HeldItems
from increcrawl_scrapy.pages.page import Page, PageItem, never_came, own_page
from increcrawl_scrapy.pages.passed_data import PASSED_META
from increcrawl_scrapy.pages.postbacks import fingerprint, is_postback, postback_row
from increcrawl_scrapy.pages.unreached import GONE as GONE_ANSWER
from increcrawl_scrapy.pages.unreached import (
    MOVED,
    SEEN,
    UNREACHED,
    UnreachedPages,
    answer_of,
    failed,
    seen,
)
from increcrawl_scrapy.pages.versions import PageVersions
from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.scope import is_incremental
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response


logger = logging.getLogger(__name__)
#: On the engine's side of Scrapy's own spider middlewares (DepthMiddleware 900,
#: RefererMiddleware 700...): the requests kept for a replay are as they left them
#: (depth in meta, Referer set, those past DEPTH_LIMIT dropped).
PRIORITY = 60


def open_pages(crawler: Crawler) -> InFlight | None:
    """The crawl's items in flight (None without the middleware)."""
    middleware = compat.component(crawler, crawler.get_spider_middleware, PageItemsMiddleware)
    return middleware.open if middleware is not None else None


def held_items(crawler: Crawler) -> HeldItems | None:
    """The crawl's items held for move detection (None without the middleware)."""
    middleware = compat.component(crawler, crawler.get_spider_middleware, PageItemsMiddleware)
    return middleware.held if middleware is not None else None


def _rules_of(spider: Spider) -> bool:
    return bool(getattr(spider, "page_rules", ()))


class PageItemsMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PageItemsMiddleware:
        spider = crawler.spider
        if spider is not None and is_incremental(spider) and not _rules_of(spider):
            # Its items are one a page, already grouped: not a layer more on every
            # response (it was one of the reactor's costs a page).
            raise NotConfigured
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.config = config_for(crawler)
        if self.config.unreached_runs and not is_incremental(crawler.spider):
            self.unreached = UnreachedPages(crawler, self.config.unreached_runs)
        self.open = InFlight(self.config.url_field, self.config.volatile_fields)
        self.held = HeldItems(crawler)
        self.versions = PageVersions(crawler)  # a page's versions this run
        self.keyed = KeyedSite(crawler, self.config.item_key)  # keys of the site's
        crawler.signals.connect(self._lost, signal=signals.item_dropped)
        crawler.signals.connect(self._lost, signal=signals.item_error)
        self.options = ContentOptions.from_config(self.config)
        follow_log_level(crawler.settings)

    def _active(self) -> bool:
        spider = self.crawler.spider
        if spider is None:
            return False
        # The incremental spider's own items are one a page; its subclasses' are yours.
        return not is_incremental(spider) or _rules_of(spider)

    async def process_spider_output(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        if not self._active() or response.meta.get(RELEASE):
            async for output in result:
                yield output
            if response.meta.get(RELEASE):  # the crawl went idle: complete if it saw every page
                if compat.busy_besides(self.crawler, response.request):
                    return  # fed since (another idle handler): the next idle releases
                released = self.held.release(bool(response.meta.get(COMPLETE)))
                self.open.expect([member for _, member in released], response)
                self.held.released.handed(response, [item for item, _ in released])
                for item, _ in released:
                    yield item
            return
        if response.meta.get(UNREACHED):
            async for output in self._checked(response, result):
                yield output
            return
        if response.status in GONE_STATUSES:  # an errback's output, when Scrapy ignores it
            outputs = [output async for output in result]
            # An errback that yields items for it says itself what the page is.
            memory = None if any(map(is_item, outputs)) else self._gone(response)
            if memory is not None:
                for output in outputs:
                    yield output
                async for item in self._gone_items(response, memory):
                    yield item
                return
            result = as_async_generator(outputs)
        in_hand = self._in_hand()
        request = fingerprint(self.crawler, response.request) if response.request else b""
        if in_hand is not None:
            in_hand.add(request)  # fetched just now: the same request is not sent again
        try:
            async for output in self._page_output(response, result):
                yield output
        finally:
            if in_hand is not None:
                in_hand.discard(request)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for request in start:
            if isinstance(request, Request) and self._active():
                linked = self._linked()
                if linked is not None:
                    linked.add(canonicalize_url(request.url))  # the spider asks for it
            yield request

    async def _checked(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The answer to a direct check of a page no link leads to any more
        (``pages/unreached.py``): the page seen, gone, moved, or nothing known."""
        answer = answer_of(self.crawler, response)
        outputs = [output async for output in result]  # the check's own: none
        if answer == SEEN:
            await seen(self.crawler, response)  # a page no link leads to, still there
        elif answer in (GONE_ANSWER, MOVED):
            memory = self._gone(response, moved=answer == MOVED)
            if memory is not None:
                outputs += [i async for i in self._gone_items(response, memory, answer == MOVED)]
            elif not response.meta.get(TAKEN):  # nor recorded at once
                failed(self.crawler, response.url, response.status)
        else:
            failed(self.crawler, response.url, response.status)
        for output in outputs:
            yield output

    def _lost(self, item: Any, response: Any = None, **_: Any) -> None:
        """Scrapy's signal of an item dropped or failed (named as yielded, with its
        response): one a pipeline before ours dropped never reaches it, and its page
        waits no more."""
        member = self.open.dropped(item, response)
        if member is None:
            return
        state = self._state()
        if state is not None and state.delivery is not None:
            never_came(member, state.delivery.settle)

    def _linked(self) -> set[str] | None:
        return None if (state := self._state()) is None else state.linked

    def _in_hand(self) -> set[bytes] | None:
        return None if (state := self._state()) is None else state.in_hand

    def _state(self) -> CrawlState | None:
        try:
            return crawl_state(self.crawler)
        except StateLockedError:  # the database in use
            return None

    async def _page_output(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        items: list[Any] = []
        requests: list[dict[str, Any]] | None = []
        links: set[str] = set()
        linked = self._linked()  # the run's, for the check of unreached pages
        async for output in result:
            if is_item(output):
                items.append(output)
                continue
            if isinstance(output, Request):
                link = canonicalize_url(output.url)
                links.add(link)
                if linked is not None:
                    linked.add(link)
            if isinstance(output, Request) and requests is not None:
                data = request_data(output, self.crawler.spider)
                requests = None if data is None or len(requests) >= MAX_REQUESTS else requests
                if requests is not None and data is not None:
                    requests.append(data)
            yield output  # requests go on at once
        await record_listing(self.crawler, response, items, requests, links)  # links only?
        for item in await self._grouped(response, items, requests, links):
            yield item

    async def _grouped(
        self,
        response: Response,
        items: list[Any],
        requests: list[dict[str, Any]] | None,
        links: set[str],
    ) -> list[Any]:
        by_page: dict[str, list[Any]] = defaultdict(list)
        at: dict[str, list[int]] = defaultdict(list)  # the items' places in the output
        free: list[bool] = []  # per item: without a URL, it may move between pages
        named: dict[str, bool] = {}  # per page: its items name it by their URL field
        for index, item in enumerate(items):
            url = ItemAdapter(item).get(self.config.url_field)
            # An item without a URL belongs to the response it was scraped from.
            page_url: str = url if isinstance(url, str) and url else response.url
            by_page[page_url].append(item)
            at[page_url].append(index)
            free.append(page_url is not url)
            named[page_url] = named.get(page_url, True) and not free[-1]
        # The response's own page: its URL however its item spells it (a trailing
        # slash, another percent-encoding), as the state's keys are.
        own_url = own_page(self.crawler, response.url, by_page)
        if links and own_url is not None:
            links = await self._own_links(response, links)
        postback = postback_row(self.crawler, response) if own_url is not None else None
        # Not recorded, so neither matched nor held (http_cache.py).
        cached = is_cached(response)
        keys = self.config.item_key
        skip = self.config.volatile_fields
        asked = None  # how the crawl asked for the response's own page
        if own_url is not None and response.request is not None:
            asked = kept_request(response.request, self.crawler.spider)
        gone: list[tuple[Any, PageItem]] = []
        placed: list[tuple[Any, PageItem] | None] = [None] * len(items)
        for url, group in by_page.items():
            own = url == own_url  # the response's own page keeps its requests
            members: list[tuple[Any, str | None, str]]
            if keys:
                members = [(item, item_key(item, keys), item_text(item, skip)) for item in group]
                patterns = self.config.volatile_patterns
                lines = sorted(
                    f"{key}\t{content_fingerprint(text, patterns)}" for _, key, text in members
                )
                text = "\n".join(lines)
            else:
                members = [(item, None, "") for item in group]
                text = "\n".join(sorted(self._item_text(item) for item in group))
            row = postback if own else None  # a postback's items: a row of their own
            page = Page(url=url, size=len(group), text=text, key=row, cached=cached)
            page.keyed_by_site = bool(keys) and not named[url]  # pages/keyed.py
            if own and links:
                page.links = "\n\nlinks:\n" + "\n".join(sorted(links))
            prints = [
                keyed_print(item, key, skip) if key is not None else item_print(item, skip)
                for item, key, _ in members
            ]
            if own:
                passed = response.meta.get(PASSED_META)  # skip_not_due.py set it
                kept = Memory(prints[:MAX_ITEMS], requests, request=asked, passed=passed)
                page.memory = kept.pack()
            else:
                page.memory = Memory(prints[:MAX_ITEMS], None, own=False).pack()
            grouped = [PageItem(page, key, text, item=item) for item, key, text in members]
            for member, item_print_ in zip(grouped, prints, strict=False):
                member.whole = item_print_.whole
                if keys:  # its print's hash is its key's: a copy is found by its fields
                    member.seen_as = item_whole(member.item, skip)
            if keys and not cached:  # its keys no page lists any more (pages/keyed.py)
                left = await self.keyed.left(
                    page, row, await self.versions.memory(url, row), prints
                )
                gone += [self._gone_item(page, old, grouped) for old in left]
            elif not cached:  # a cached answer: neither matched nor held
                left = await self.versions.match(page, prints, grouped, named[url])
                gone += [self._gone_item(page, old, grouped) for old in left]
                page.size = len(grouped)
            page.members = grouped
            for index, item, member in zip(at[url], group, grouped, strict=False):
                placed[index] = (item, member)
        held = self.held
        # Items without a URL, and gone ones, may have moved: held for the run's end.
        entries = [(*pair, moves) for pair, moves in zip(placed, free, strict=True) if pair]
        out = [
            (item, member)
            for item, member, moves in entries + [(i, m, True) for i, m in gone]
            if not moves or cached or not held.hold(item, member)
        ]
        return self._expected(out, response)

    def _expected(self, out: list[tuple[Any, PageItem]], response: Response) -> list[Any]:
        """*out*, a response's items, on their way; once the crawl is closing, with
        every item held (``pages/moved.py``): no idle comes, this response carries them."""
        if self.held.to_release() and compat.engine_closing(self.crawler):
            out = out + self.held.release(complete=False)
        self.open.expect([member for _, member in out], response)
        items = [item for item, _ in out]
        self.held.released.handed(response, items)  # with a release's, if it carries them
        return items

    def _item_text(self, item: Any) -> str:
        """An item's part of its page's text: its content field, if the project named
        one and the item has it, else the item itself (``item_fingerprint.py``)."""
        field_name = self.config.content_field
        if field_name:
            content = ItemAdapter(item).get(field_name)
            if content is not None:
                return str(content)
        return item_text(item, self.config.volatile_fields)

    async def _own_links(self, response: Response, links: set[str]) -> set[str]:
        """Of the URLs the response led to, those its main content (not its navigation) links to."""
        if not isinstance(response, TextResponse):
            return links
        try:
            main = await compat.in_content_thread(main_links, response, self.options)
        except ContentFailed as exc:  # a library's fault: the page's items still go on
            links_failed(self.crawler.stats, response.url, exc)
            return links
        except UnusablePage:
            return links  # no text to tell them by: every link is the page's
        return links if main is None else links & main

    def _gone_item(
        self, page: Page, old: ItemPrint, grouped: list[PageItem]
    ) -> tuple[Any, PageItem]:
        """An item of *page*'s previous version, gone: the fields that identified it."""
        item = dict(old.values)
        grouped.append(PageItem(page, None, label=GONE, whole=old.whole, old=old, item=item))
        return item, grouped[-1]

    def process_spider_exception(
        self, response: Response, exception: Exception, spider: Spider | None = None
    ) -> AsyncIterator[Any] | None:
        """Scrapy ignoring a 404 or 410 (``HttpError``, no errback): the page's items,
        gone, if it had state; else HttpErrorMiddleware ignores it, as before."""
        if not isinstance(exception, HttpError):
            return None
        memory = self._gone(response)
        return None if memory is None else self._gone_items(response, memory)

    def _gone(self, response: Response, moved: bool = False) -> Memory | None:
        """A page with state answering 404 or 410 (or *moved*: a permanent redirect
        within the site, ``pages/unreached.py``): the memory of the items it had,
        if it was taken as gone (``pages/gone.py``)."""
        if not self._active() or is_incremental(self.crawler.spider):
            return None  # the incremental spider records its gone pages itself
        if is_postback(response.request) or is_cached(response):
            return None  # a form's answer (postbacks.py), or no fetch (http_cache.py)
        return gone_memory(self.crawler, response, moved=moved)

    async def _gone_items(
        self, response: Response, memory: Memory, moved: bool = False
    ) -> AsyncIterator[Any]:
        """A gone page's items, gone, that are not held for the run's end: with a
        declared key, those no other page lists (``keyed.py``)."""
        items = await gone_prints(self.crawler, self.keyed, response, memory, moved)
        if not items:
            return  # recorded gone: every key is listed by another page
        page = gone_page(response, memory, moved)
        gone = [self._gone_item(page, old, page.members) for old in items]
        page.size = len(page.members)
        logger.info(
            "%s answered %d: %s (%d items delivered gone)",
            response.url,
            response.status,
            "moved within the site, gone from its URL" if moved else "gone",
            page.size,
        )
        held = self.held  # they may have moved to another page
        out = [(item, member) for item, member in gone if not held.hold(item, member)]
        for item in self._expected(out, response):
            yield item
