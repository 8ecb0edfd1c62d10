"""What the incremental spider does with a fetched page's content: its text (on the
content thread, ``crawl/response_text.py``), the size limit, soft 404s
(``content/soft404.py``) and canonical links, for single fetches and batch results
alike. A page whose ``rel=canonical`` names another URL of the site is an alias: the
item says ``alias_of`` and the pipeline keeps its row without reporting it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.blocked import is_challenge
from increcrawl_scrapy.content.fingerprint import TakenPrints, taken_prints
from increcrawl_scrapy.content.library_logs import follow_log_level
from increcrawl_scrapy.content.page_text import (
    ContentFailed,
    ContentOptions,
    PageText,
    UnusablePage,
    page_text,
)
from increcrawl_scrapy.content.parse import FLATTEN_DEPTH
from increcrawl_scrapy.content.soft404 import META_PROBE, NotFound, probe_url
from increcrawl_scrapy.crawl import hidden
from increcrawl_scrapy.crawl.content_processes import ContentProcesses
from increcrawl_scrapy.crawl.response_text import response_text, with_print
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.geonode.payload import META_PARAMS
from increcrawl_scrapy.spiders.canonical import checked_alias
from increcrawl_scrapy.spiders.page_items import final_url_of, moved_away, moved_item
from increcrawl_scrapy.urls import normalization_settings, normalize_url, same_page

if TYPE_CHECKING:
    import scrapy
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.scope import Scope

logger = logging.getLogger(__name__)

#: Pages waiting for their text, at most: past that the engine is paused (no
#: new downloads) until half are done. Each waiting page holds its response: without
#: a bound, a site answering faster than the CPU converts filled 800 MB.
BACKLOG = 32


class PageContent:
    """One crawl's content steps; ``origin`` is the seed's site."""

    def __init__(
        self,
        crawler: Crawler,
        options: ContentOptions,
        origin: str,
        scope: Scope,
        normalize: Callable[[str], str],
        prints: TakenPrints | None = None,
    ) -> None:
        self.crawler = crawler
        self.options = options
        self._traced: set[str] = set()  # failures logged with their tracebacks
        self.origin = origin
        self.scope = scope  # the seed's site: a canonical URL elsewhere is not an alias
        self.normalize = normalize
        self.not_found: NotFound | None = None  # the site's "not found" page
        #: The home page, as asked and as answered (a redirect): never "not found".
        self._homes = {normalize_url(origin.rstrip("/") + "/")}
        self._paused = False  # the engine, by this, while the content work catches up
        #: Where the fingerprint taken with a page's text waits for the pipeline (only
        #: with the default rules: users' rules may backtrack, the pipeline's threads
        #: take them), or None.
        self.prints = prints
        self._in_hand = 0  # pages given to it and not answered yet
        #: The user's volatile rules (an alias's text is compared under them).
        self.patterns: tuple[str, ...] = ()
        #: Where a fetched page's text is taken (a worker process, else the thread).
        self.processes = ContentProcesses(0)

    @classmethod
    def of(
        cls, crawler: Crawler, config: IncrecrawlConfig, origin: str, scope: Scope
    ) -> PageContent:
        normalize = partial(normalize_url, **normalization_settings(config))
        # The pipeline fingerprints the item's markdown unless told another field.
        ours = not config.volatile_patterns and config.content_field in (None, "", "markdown")
        prints = taken_prints(crawler) if ours else None
        options = ContentOptions.from_config(config)
        follow_log_level(crawler.settings)
        made = cls(crawler, options, origin, scope, normalize, prints)
        made.patterns = tuple(config.volatile_patterns)
        made.processes = ContentProcesses.of(crawler, config.content_processes)
        return made

    async def with_text(
        self, item: dict[str, Any], response: scrapy.http.Response | None = None
    ) -> dict[str, Any]:
        """*item* (a page answered 200) with its text: from *response*, else from the
        item's own ``html`` or ``markdown`` (a batch result); or the item of a page
        over the size limit, or of a soft 404."""
        found: PageText | None
        try:  # parsing and conversion: CPU work, off the reactor's thread
            self._take_in_hand()
            try:
                if response is not None:
                    found, taken = await self.text_of(response)
                else:
                    found, taken = await self.batch_text(item)
            finally:
                self._in_hand -= 1
                self._let_go()
        except UnusablePage as exc:  # too large, no document
            return self.unusable(item, exc)
        item.pop("html", None)
        if found is None:
            return item
        stats.inc(self.crawler.stats, stats.CONTENT_FOUND, how=found.how)
        if found.flattened:  # its text is whole; its structure is not the page's
            stats.inc(self.crawler.stats, stats.CONTENT_FLATTENED)
            logger.warning(
                "%s: elements nested deeper than %d flattened (as browsers do), its text kept",
                item["url"],
                FLATTEN_DEPTH,
            )
        if found.how == "whole":  # no main content found: the template in its text
            crawl_state(self.crawler).hidden.taken_whole(item["url"])
        elif found.how == "cut":
            logger.info(
                "%s: over INCRECRAWL_CONTENT_MAX_BYTES (%d bytes) and no main element: "
                "its text is its whole body less the site's template, not extracted",
                item["url"],
                self.options.extract_max_bytes,
            )
        if not found.text.strip():  # a blank page, or one its scripts fill
            stats.inc(self.crawler.stats, stats.NO_TEXT)
            logger.warning("%s has no text at all: recorded as an empty page", item["url"])
        item["markdown"] = found.text
        if await self.is_not_found(item["url"], found.text):
            return {**item, "http_status": 404, "markdown": None}
        if taken is not None and self.prints is not None:
            self.prints.put(found.text, taken)
        target = self.alias_of(item, found.canonical)
        if target is None:
            return item
        canonical = await checked_alias(self, item, target, found.text, taken, response)
        return {**item, "alias_of": canonical} if canonical else item

    async def text_of(self, response: scrapy.http.Response) -> tuple[PageText, str | None]:
        """*response*'s text, and its fingerprint when the default rules take it."""
        return await self.processes.text_of(self.prints is not None, response, self.options)

    def _take_in_hand(self) -> None:
        self._in_hand += 1
        engine = self.crawler.engine
        if self._in_hand >= BACKLOG and engine is not None and not engine.paused:
            engine.pause()
            self._paused = True

    def _let_go(self) -> None:
        engine = self.crawler.engine
        if self._paused and self._in_hand <= BACKLOG // 2 and engine is not None:
            engine.unpause()
            self._paused = False
            compat.wake_engine(self.crawler)  # now, not at its next heartbeat (seconds away)

    def alias_of(self, item: dict[str, Any], canonical: str | None) -> str | None:
        """The other URL of the site this page names as its canonical one, if any (an
        alias only if its text is that page's: ``canonical.py``)."""
        if not canonical:
            return None
        target = urljoin(item["url"], canonical)
        if not self.scope.follows_redirect(target):
            return None  # another site's: this page is still ours
        try:
            own = item.get("normalized_url") or self.normalize(item["url"])
            if same_page(self.normalize(target), own):
                return None  # itself, spelled with https or www.: not another page
        except ValueError:
            return None
        return target  # an alias if its text is that page's (crawl/aliases.py)

    async def moved(
        self, response: scrapy.http.Response, row: dict[str, Any], final: str | None
    ) -> dict[str, Any] | None:
        """The item of *row*'s page if it moved away to *final* (``moved_away``)."""
        status = moved_away(response, final)
        if status is None or final is None or not await self.kept_elsewhere(row, final):
            return None
        return moved_item(row, status, final)

    async def kept_elsewhere(self, item: dict[str, Any], url: str) -> bool:
        """Whether *url* is a live page the state keeps under another key than *item*'s
        (a page of the site that moved to ``www.`` has a row there of its own): read
        off the reactor's thread, a remote database is a round trip away."""
        try:
            key = self.normalize(url)
            if key == (item.get("normalized_url") or self.normalize(item["url"])):
                return False
        except ValueError:
            return False
        store = crawl_state(self.crawler).store
        row = await compat.in_thread(store.get, url)
        return row is not None and not row.gone

    async def learn_not_found(self, ask: bool = True) -> None:
        """Ask the seed's site for a page that cannot exist: a 200 is its "not found"
        page (``content/soft404.py``), unless it is the home page's text (a catch-all
        site answering every path with it: a live page, never "not found"). What was
        learned is kept in the state: a run whose probe gets no answer goes by the
        last one's (soft 404s never flap between gone and back with a probe's luck),
        as does one that does not *ask*."""
        store = crawl_state(self.crawler).store
        name = f"not_found:{self.origin}"
        if not ask:
            self.not_found = NotFound.loads(await compat.in_thread(store.remembered, name))
            return
        url = probe_url(self.origin)
        try:
            response = await self._ask(url)
        except Exception as exc:  # robots.txt, a refused connection: the last answer
            logger.debug("No answer to %s (%s): the last run's verdict holds", url, exc)
            self.not_found = NotFound.loads(await compat.in_thread(store.remembered, name))
            return
        stats.inc(self.crawler.stats, stats.NOT_FOUND_PROBES)
        try:
            found = await self._learned(response, url)
        except ContentFailed as exc:  # a library's fault on it: the last answer
            logger.warning(
                "%s: the site's \"not found\" page: %s; the last run's verdict holds\n%s",
                url,
                exc,
                exc.trace.rstrip(),
            )
            self.not_found = NotFound.loads(await compat.in_thread(store.remembered, name))
            return
        await compat.in_thread(store.remember, name, found.dumps() if found else "")
        self.not_found = found
        if found is not None:
            logger.info(
                "%s answers 200 for a page that does not exist: pages whose text is that "
                "answer's are gone (soft 404s)",
                self.origin,
            )

    async def _learned(self, response: scrapy.http.Response, url: str) -> NotFound | None:
        """The site's "not found" page from the probe's *response* (to *url*), unless
        it is the home page's (None); raises ContentFailed where a library failed on
        either's text."""
        learned = await self._page_text(response)
        if learned and is_challenge(response.body, learned):
            learned = ""  # a wall in front of the site, not its "not found" page
        found = NotFound(learned, url) if learned else None
        if found is not None:
            home = self._home()
            try:  # asked only of a site that answered the probe with a page
                answer = await self._ask(home, redirect=True)  # "/" -> "/en/", say
            except Exception as exc:
                logger.debug("No answer to %s (%s)", home, exc)
            else:
                self._homes.add(normalize_url(answer.url))
                text = await self._page_text(answer, redirected=True)
                home_is_it = bool(text) and await compat.in_content_thread(
                    found.answers, text, home
                )
                if home_is_it:
                    stats.inc(self.crawler.stats, stats.NOT_FOUND_CATCH_ALL)
                    logger.warning(
                        "%s answers every path with its home page: a page it no longer "
                        "has is not told from a page (soft 404s are not judged)",
                        self.origin,
                    )
                    found = None
        return found

    def _home(self) -> str:
        return self.origin.rstrip("/") + "/"

    async def _ask(self, url: str, redirect: bool = False) -> scrapy.http.Response:
        # Asked directly, never through Geonode: it costs no token. For the probe, a
        # redirect (to the home page, say) is not a "not found" page.
        meta: dict[str, Any] = {META_PROBE: True, META_PARAMS: False}
        if not redirect:
            meta.update(handle_httpstatus_all=True, dont_redirect=True)
        request = Request(url, callback=NO_CALLBACK, dont_filter=True, meta=meta)
        return await compat.download(self.crawler, request)

    async def _page_text(self, response: scrapy.http.Response, redirected: bool = False) -> str:
        """*response*'s text if it is a page (a 200, and, unless *redirected*, not
        a redirect's answer), else ""."""
        if response.status != 200 or (final_url_of(response) is not None and not redirected):
            return ""
        try:
            found, _ = await compat.in_content_thread(
                with_print, False, response_text, response, self.options
            )
        except ContentFailed:
            raise
        except UnusablePage:  # too large, empty: no page to learn
            return ""
        return found.text if found is not None and found.text.strip() else ""

    async def is_not_found(self, url: str, text: str | None) -> bool:
        if self.not_found is None or text is None:
            return False
        if normalize_url(url) in self._homes:
            return False  # the home page is never "not found"
        if not await compat.in_content_thread(self.not_found.answers, text, url):
            return False
        stats.inc(self.crawler.stats, stats.SOFT_404)
        crawl_state(self.crawler).hidden.fired(hidden.SOFT_404, url)
        logger.info('%s answers with the site\'s "not found" page: gone', url)
        return True

    async def batch_text(self, fields: dict[str, Any]) -> tuple[PageText | None, str | None]:
        """A batch result's page text, taken as a single extract's (off the reactor),
        and its fingerprint when taken beforehand."""
        body, kind = fields.get("html"), "text/html"
        if body is None:
            body, kind = fields.get("markdown"), "text/markdown"
        if body is None:
            return None, None
        return await compat.in_content_thread(
            with_print,
            self.prints is not None,
            page_text,
            body.encode("utf-8"),
            kind,
            body,
            self.options,
        )

    def unusable(self, item: dict[str, Any], error: UnusablePage) -> dict[str, Any]:
        stats.inc(self.crawler.stats, error.stat)
        trace, cause = getattr(error, "trace", ""), getattr(error, "cause", "")
        if trace and cause not in self._traced:  # where it failed, once a run a cause
            self._traced.add(cause)
            logger.warning("%s: %s; it backs off\n%s", item["url"], error, trace.rstrip())
        else:
            logger.warning("%s: %s; it backs off", item["url"], error)
        item.pop("html", None)
        return {
            **item,
            "http_status": 0,
            "markdown": None,
            "error": str(error),
            "error_kind": error.kind,
            "site_failure": True,
        }
