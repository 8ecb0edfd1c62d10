"""``rel=canonical`` checked against content, in the incremental spider. A page that
names another page of the site as its canonical one is an alias (the item's
``alias_of``: its row kept, hashed ``alias:URL``, nothing reported) only when its text
is that page's: its stored text's, else its text asked now, the same way the page was
asked (the stored one may be older than both: the two edited alike, the canonical page
not due yet). A canonical page the state does not have is not crawled: this page is
the only copy, a page of its own, reported as any other."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.geonode.payload import META_PARAMS

if TYPE_CHECKING:
    import scrapy
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.content.page_text import PageText
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.state import StateStore

#: What the canonical page's request keeps of the page's: the way it was fetched.
_KEPT = (META_PARAMS, "download_maxsize")


class PageContent(Protocol):
    """What of the spider's content steps (``page_content.py``) this needs."""

    crawler: Crawler
    patterns: tuple[str, ...]  # the user's volatile rules

    async def text_of(self, response: scrapy.http.Response) -> tuple[PageText, str | None]: ...


async def checked_alias(
    content: PageContent,
    item: dict[str, Any],
    target: str,
    text: str,
    taken: str | None,
    response: scrapy.http.Response | None,
) -> str | None:
    """The canonical page's URL if this page (*item*, its *text*, fingerprinted
    *taken* by the default rules) is an alias of *target*, else None."""
    store = crawl_state(content.crawler).store
    row = await compat.in_thread(_canonical_row, store, target, item["url"])
    if row is not None and not row.gone:
        fingerprint = taken
        if fingerprint is None or content.patterns:
            fingerprint = await compat.in_content_thread(
                content_fingerprint, text, content.patterns
            )
        if row.content_hash == fingerprint:
            return row.url
        asked = response.request.meta if response is not None and response.request else {}
        if await _asked_now(content, asked, row.url) == fingerprint:
            return row.url
    stats.inc(content.crawler.stats, stats.ALIASES_REFUSED)
    return None


def _canonical_row(store: StateStore, target: str, page_url: str) -> PageState | None:
    """The state's row of *target*, or of its spelling with the page's own scheme and
    ``www.`` (an http site's pages naming their canonical's https spelling)."""
    for spelling in (target, _respelled(target, page_url)):
        try:
            row = store.get(spelling)
        except ValueError:
            return None
        if row is not None:
            return row
    return None


def _respelled(target: str, page_url: str) -> str:
    wanted, page = urlsplit(target), urlsplit(page_url)
    host = wanted.netloc.removeprefix("www.")
    if page.netloc.startswith("www.") and not host.startswith("www."):
        host = "www." + host
    return urlunsplit((page.scheme, host, wanted.path, wanted.query, ""))


async def _asked_now(content: PageContent, asked: dict[str, Any], url: str) -> str | None:
    """The fingerprint of *url*'s text asked now, as the page whose request had the
    meta *asked* was (directly, or through Geonode; a batch result's: as the crawl
    asks a page), or None."""
    meta = {key: asked[key] for key in _KEPT if key in asked}
    request = Request(
        url, callback=NO_CALLBACK, dont_filter=True, meta={**meta, "handle_httpstatus_all": True}
    )
    stats.inc(content.crawler.stats, stats.CANONICAL_ASKED)
    try:
        answer = await compat.download(content.crawler, request)
        if answer.status != 200:
            return None
        found, taken = await content.text_of(answer)
    except Exception:  # no answer, no text (UnusablePage): nothing to compare with
        return None
    if taken is None or content.patterns:
        return await compat.in_content_thread(content_fingerprint, found.text, content.patterns)
    return taken
