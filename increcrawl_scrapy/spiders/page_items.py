"""What a page fetch becomes: the conditional headers it is sent with, and the item
fields of a response, a failure or a batch result (the pipeline records them)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import scrapy
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.error import ConnectError, ConnectionLost, DNSLookupError, TCPTimedOutError
from twisted.internet.error import TimeoutError as DownloadTimeout

from increcrawl_scrapy.content.page_text import PageTooLarge
from increcrawl_scrapy.crawl.validators import header_of
from increcrawl_scrapy.geonode.errors import GeonodeError
from increcrawl_scrapy.geonode.payload import META_ANSWER
from increcrawl_scrapy.redirects import OffsiteRedirect
from increcrawl_scrapy.schedule.rows import MOVED_STATUSES, PageState

logger = logging.getLogger(__name__)

#: Request meta: the URL as the row has it, and the row's key.
META_URL = "increcrawl_url"
META_KEY = "increcrawl_key"
#: Request meta: the sitemaps no longer list the row (a redirect may be a move).
META_UNLISTED = "increcrawl_unlisted"


def failure_kind(error: BaseException | None) -> tuple[int, bool]:
    """``(origin status or 0, whether the site failed)`` for a failed page fetch.
    Site failures back off; API and transport failures leave the page due."""
    if isinstance(error, HttpError):
        return error.response.status, True
    if isinstance(error, OffsiteRedirect):
        return error.status, True
    if isinstance(error, GeonodeError):
        return 0, error.site_failure
    if too_large(error):
        return 0, True  # a counted site failure that backs off
    if isinstance(error, DownloadTimeout):
        return 0, True  # the origin did not answer in DOWNLOAD_TIMEOUT
    return 0, False


def error_kind(error: BaseException | None) -> str:
    """What failed, in a word or two: failures are counted by it (the report)."""
    if isinstance(error, HttpError):
        return f"HTTP {error.response.status}"
    if isinstance(error, OffsiteRedirect):
        return OFFSITE
    if isinstance(error, GeonodeError):  # by the API's code (or its status) when it gave one
        code = getattr(error, "code", None) or getattr(error, "status", None)
        return f"API {code}" if code else "API"
    if too_large(error):
        return TOO_LARGE
    if isinstance(error, DownloadTimeout | TCPTimedOutError):
        return "timeout"
    if isinstance(error, ConnectError | DNSLookupError | ConnectionLost):
        return "connection"
    return type(error).__name__ if error is not None else "failed"


#: The kinds of failures that are not exceptions (``error_kind``).
OFFSITE, TOO_LARGE = "off-site redirect", "too large"


def failed_item(request: scrapy.Request, error: BaseException | None, message: str) -> dict:
    """The item of a page fetch that failed with *error*."""
    status, site_failure = failure_kind(error)
    logger.info(
        "Fetch of %s failed (%s); %s",
        request.url,
        status or message,
        "it backs off" if site_failure else "it stays due",
    )
    return {
        "url": request.meta.get(META_URL, request.url),
        "normalized_url": request.meta.get(META_KEY),
        "http_status": status,
        "error": message,
        "error_kind": error_kind(error),
        "site_failure": site_failure,
    }


def row_of(response: scrapy.http.Response) -> dict[str, Any]:
    """The URL and key of the row a page response answers."""
    return {
        "url": response.meta.get(META_URL, response.url),
        "normalized_url": response.meta.get(META_KEY),
    }


def page_item(
    response: scrapy.http.Response, row: dict[str, Any] | None = None, final: str | None = None
) -> dict[str, Any]:
    """The item of a page answered by *response*, before its text is taken."""
    return {
        **(row or row_of(response)),
        "final_url": final or final_url_of(response),
        "http_status": response.status,
        "markdown": None,
        "fetcher": "geonode" if "geonode" in response.flags else "direct",
        "etag": header_of(response, "ETag"),
        "last_modified": header_of(response, "Last-Modified"),
    }


def moved_away(response: scrapy.http.Response, final: str | None) -> int | None:
    """The permanent redirect a page the sitemaps no longer list (for
    INCRECRAWL_MISSING_RUNS runs: a shorter absence means nothing) answered with, to
    *final*: it moved there (a slug change, a move to ``www.``) if *final* is a live
    page the state keeps (``PageContent.kept_elsewhere``). None for any other answer:
    a listed page's redirect is the page's (the sitemap names it), a temporary one is
    no move."""
    if final is None or not response.meta.get(META_UNLISTED):
        return None
    statuses = [s for s in response.meta.get("redirect_reasons") or () if isinstance(s, int)]
    if not statuses or not MOVED_STATUSES.issuperset(statuses):
        return None
    return statuses[0]


def moved_item(row: dict[str, Any], status: int, final: str) -> dict[str, Any]:
    """The item of a page that moved away (``moved_away``) to *final*, a live page the
    state keeps under another key: its row is gone, ``moved_to`` says so."""
    logger.info("%s moved to %s (%d): gone", row["url"], final, status)
    return {**row, "http_status": status, "final_url": final, "moved_to": final, "markdown": None}


def final_url_of(response: scrapy.http.Response) -> str | None:
    """Where the page was finally fetched from, when not the requested URL."""
    requested = response.meta.get(META_URL, response.url)
    answer = response.meta.get(META_ANSWER)
    final = mapping(mapping(answer).get("metadata")).get("url") if answer else response.url
    return final if isinstance(final, str) and final != requested else None


def too_large(failure: BaseException | None) -> bool:
    """Whether a download was cut at its size limit (``download_maxsize``: by
    Scrapy's handler, or after decompression by HttpCompressionMiddleware)."""
    return isinstance(failure, PageTooLarge) or (
        failure is not None and "max size" in str(failure) and "larger than" in str(failure)
    )


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def batch_item(page: PageState, result: dict[str, Any], fields: dict[str, Any]) -> dict:
    """The item of a batch result, on the row that asked for it."""
    final = result.get("url")
    return {
        "url": page.url,
        "normalized_url": page.normalized_url,
        "final_url": final if isinstance(final, str) and final != page.url else None,
        "fetcher": "geonode-batch",
        **fields,
    }


def tokens_of(answer: Any) -> int:
    """The tokens an API answer (or a batch result) says it cost; 0 when unsaid."""
    answer = mapping(answer)
    tokens = answer.get("tokens_charged", mapping(answer.get("metadata")).get("tokens_charged"))
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else 0


async def collected(outputs: AsyncIterator[Any]) -> Iterable[Any]:
    """A callback's *outputs*, gathered: returned by a coroutine callback, Scrapy waits
    for them once, where an async generator has each of its CONCURRENT_ITEMS output
    workers wait on an empty queue (measured: a fifth of a page's CPU). A subclass's
    callback failing half-way still has what it gave before processed, then its error."""
    done: list[Any] = []
    try:
        async for output in outputs:
            done.append(output)
    except Exception as exc:
        return _then_raise(done, exc)
    return done


def _then_raise(outputs: list[Any], exc: Exception) -> Iterator[Any]:
    yield from outputs
    raise exc
