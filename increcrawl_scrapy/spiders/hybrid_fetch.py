"""Hybrid fetching in the incremental spider (``INCRECRAWL_FETCHER = "hybrid"``): a
page is first asked directly, as an ordinary Scrapy request (Scrapy's slots,
AutoThrottle and robots.txt apply; conditional with the validators kept from direct
answers), and extracted through Geonode (paid) only when that probe says the page
changed or could not see it. Which hosts are probed is ``host_fetchers.py``'s.

What is stored and reported is Geonode's text on every host: a probe only ever
says "unchanged" (a 304, or its fingerprint equal to the stored one) or "gone", so
a host switching between probing and extracting never reports a change.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import IgnoreRequest
from scrapy.http import Request
from scrapy.spidermiddlewares.httperror import HttpError

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.blocked import (
    BLOCKED_STATUSES,
    SHELL_CHARS,
    is_challenge,
    is_shell,
)
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.crawl import hidden
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.geonode.payload import META_PARAMS
from increcrawl_scrapy.redirects import OffsiteRedirect
from increcrawl_scrapy.schedule.rows import GONE_STATUSES
from increcrawl_scrapy.spiders.host_fetchers import EXTRACT as EXTRACT_MODE
from increcrawl_scrapy.spiders.host_fetchers import HostFetchers
from increcrawl_scrapy.spiders.page_items import META_KEY, META_URL, too_large

if TYPE_CHECKING:
    from scrapy.http import Response
    from twisted.python.failure import Failure

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.spiders.page_content import PageContent
    from increcrawl_scrapy.spiders.tokens import TokenBudget
    from increcrawl_scrapy.state import StateStore

#: Request meta: what a probe knows (its step, the stored fingerprint), and what an
#: extraction after a probe carries (the probe's fingerprint and validators).
META = "increcrawl_hybrid"
PROBE, EXTRACT = "probe", "extract"
#: The probe's own answers the callback judges (others are failures).
PROBE_STATUSES = sorted({304, *GONE_STATUSES, *BLOCKED_STATUSES})
#: What an extraction keeps of its probe's meta (not what Scrapy set on it).
_KEPT = (META_URL, META_KEY, "download_maxsize")


def host_of(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


class HybridFetch:
    def __init__(
        self, crawler: Any, config: IncrecrawlConfig, store: StateStore, content: PageContent
    ) -> None:
        self.crawler = crawler
        self.config = config
        self.content = content
        self.hosts = HostFetchers(
            config.hybrid_retry, config.clock, store.remembered, store.remember
        )

    # -- sending -------------------------------------------------------------------

    async def before(self, page: PageState) -> None:
        """Wait, if the page's host is being judged by its first probe."""
        host = host_of(page.url)
        await self.hosts.load(host)
        while host in self.hosts.scouting:
            await compat.sleep(0.05)
        if self.hosts.judging(host):
            self.hosts.scouting.add(host)  # this page is the scout

    def request(self, page: PageState, request: Request, probe: bool = True) -> Request:
        """*request* (the page's, as direct mode sends it) as a probe, or as an
        extraction when its host is not probed (or not *probe*: a page rule's)."""
        host = host_of(page.url)
        if not probe or not self.hosts.probes(host):
            self.hosts.scouting.discard(host)  # not this page: the host's next one judges
            reason = "host" if probe else "rule"
            stats.inc(self.crawler.stats, stats.HYBRID_EXTRACTIONS, reason=reason)
            # Without the probes' validators: they describe what direct requests saw.
            meta = {**request.meta, **self._extraction_params(host)}
            return request.replace(meta=meta, headers={})
        stats.inc(self.crawler.stats, stats.HYBRID_PROBES)
        # A host not probed for a while is asked without conditions: its answer is
        # compared with Geonode's (a 304 to validators a probe kept says nothing).
        retried = self.hosts.hosts[host].mode == EXTRACT_MODE
        meta = {
            **request.meta,
            META_PARAMS: False,  # Scrapy's own download
            META: {"step": PROBE, "stored": None if page.gone else page.content_hash},
            "handle_httpstatus_list": PROBE_STATUSES,
            "dont_retry": True,  # a refusal is an answer: Geonode is asked instead
        }
        return request.replace(meta=meta, headers={} if retried else request.headers)

    def _extraction_params(self, host: str) -> dict[str, Any]:
        fetcher = self.hosts.hosts.get(host)
        if fetcher is not None and fetcher.reason == "shell":
            return {META_PARAMS: {"render_js": True}}
        return {}

    def extraction(
        self, request: Request, reason: str, probe: dict[str, Any] | None = None
    ) -> Request:
        """The paid extraction of a probed page: Geonode's answer is the item."""
        stats.inc(self.crawler.stats, stats.HYBRID_EXTRACTIONS, reason=reason)
        meta = {key: request.meta[key] for key in _KEPT if key in request.meta}
        meta["handle_httpstatus_list"] = [304, *sorted(GONE_STATUSES)]
        meta[META] = {"step": EXTRACT, **(probe or {})}
        if reason == "shell":
            meta[META_PARAMS] = {"render_js": True}
        # After a probe that said "changed", no condition: Geonode must answer it.
        return request.replace(meta=meta, headers={} if probe else request.headers)

    # -- answers ---------------------------------------------------------------------

    @staticmethod
    def step(meta: dict[str, Any]) -> str | None:
        """A request's hybrid step (its *meta*'s): PROBE, EXTRACT or None."""
        return (meta.get(META) or {}).get("step")

    async def probed(
        self,
        response: Response,
        item_of: Callable[[Response], dict[str, Any]],
        tokens: TokenBudget,
    ) -> AsyncIterator[Any]:
        """The probe's answer: the check's item (free), or the extraction to pay for."""
        request = response.request
        assert request is not None
        host, stored = host_of(request.url), request.meta[META].get("stored")
        status, body = response.status, response.body
        if status in BLOCKED_STATUSES:
            await self.hosts.direct_fails(host, "blocked")
            yield self.extraction(request, "blocked")
            return
        item = item_of(response)
        if status == 200:
            item = await self.content.with_text(item, response)
        text = item.get("markdown")
        # A wall is a page whose own text is the challenge (judged on the text: the
        # scripts of JavaScript Detections ride on every normal page of some sites).
        if status == 200 and is_challenge(body, text):
            crawl_state(self.crawler).hidden.fired(hidden.CHALLENGE, request.url)
            await self.hosts.direct_fails(host, "challenge")
            yield self.extraction(request, "challenge")
            return
        # Little text of its own (or none): a shell only scripts fill? (Parsed again
        # only then: most pages have text enough.)
        little = status == 200 and len("".join((text or "").split())) < SHELL_CHARS
        if little and await compat.in_content_thread(is_shell, body):
            await self.hosts.direct_fails(host, "shell")
            yield self.extraction(request, "shell")
            return
        answered = item.get("http_status") in (304, *GONE_STATUSES) or item.get("alias_of")
        if item.get("http_status") == 200 and text is not None and not item.get("alias_of"):
            found = await compat.in_content_thread(
                content_fingerprint, text, self.config.volatile_patterns
            )
            if found != stored:
                # Changed (or new): Geonode's text is what is kept and reported.
                probe = {
                    "print": found,
                    "etag": item.get("etag"),
                    "last_modified": item.get("last_modified"),
                }
                yield self.extraction(request, "changed" if stored else "new", probe)
                return
            stats.inc(self.crawler.stats, stats.HYBRID_AGREED)
            await self.hosts.direct_sees(host, agreed=True)
            answered = True
        elif item.get("http_status") in (304, *GONE_STATUSES):
            await self.hosts.direct_sees(host, agreed=False)
        self.release(request)  # a failure, an alias: no verdict, the next page judges
        if answered:
            stats.inc(self.crawler.stats, stats.HYBRID_SAVED)
        tokens.answer(1, 0)
        yield item

    async def finishing(
        self, response: Response, outputs: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        """*outputs* of an extraction's response, then its scout released."""
        try:
            async for output in outputs:
                yield output
        finally:
            assert response.request is not None
            self.release(response.request)

    def release(self, request: Request) -> None:
        """*request*'s page is done: if it was its host's scout and gave no verdict,
        the host's next page is the next scout (no page waits for nothing)."""
        self.hosts.scouting.discard(host_of(request.url))

    async def extracted(self, response: Response, item: dict[str, Any]) -> dict[str, Any]:
        """An extraction after a probe: the two texts are compared for the host, and
        the item keeps the probe's validators only if both saw the same version of
        the page. Validators of another answer than the stored fingerprint's would
        make the next probe a 304 to an edit the fingerprint never saw (an API that
        lags the origin): without them the next probe is unconditional."""
        request = response.request
        assert request is not None
        probe = request.meta[META]
        if "print" not in probe:
            return item  # after a blocked probe: nothing to compare
        item.update(fetcher="hybrid", etag=None, last_modified=None)
        text = item.get("markdown")
        if item.get("http_status") != 200 or text is None:
            return item
        found = await compat.in_content_thread(
            content_fingerprint, text, self.config.volatile_patterns
        )
        host = host_of(request.url)
        if found == probe["print"]:
            item.update(etag=probe["etag"], last_modified=probe["last_modified"])
            stats.inc(self.crawler.stats, stats.HYBRID_AGREED)
            await self.hosts.direct_sees(host, agreed=True)
        else:
            stats.inc(self.crawler.stats, stats.HYBRID_DIFFERED)
            await self.hosts.direct_fails(host, "differs")
        return item

    def takes(self, failure: Failure) -> bool:
        """Whether *failure* is a probe's that got no answer: Geonode is asked. An
        origin status, an off-site redirect, a page too large are the site's answer,
        handled as in direct mode; so is robots.txt's "no"."""
        request = failure.request  # type: ignore[attr-defined]
        if self.step(request.meta) is None:
            return False
        if self.step(request.meta) == PROBE and not (
            failure.check(HttpError, OffsiteRedirect, IgnoreRequest) or too_large(failure.value)
        ):
            return True
        self.release(request)  # the page is done without a verdict
        return False

    async def probe_failed(self, failure: Failure) -> Request:
        """A probe that got no answer (refused, reset, timed out): Geonode is asked."""
        request = failure.request  # type: ignore[attr-defined]
        await self.hosts.direct_fails(host_of(request.url), "failed")
        return self.extraction(request, "failed")
