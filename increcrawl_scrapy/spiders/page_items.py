"""What a page fetch becomes: the conditional headers it is sent with, and the item
fields of a response, a failure or a batch result (the pipeline records them)."""

from __future__ import annotations

import hashlib
from typing import Any

import scrapy
from scrapy.http import HtmlResponse, TextResponse
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.error import TimeoutError as DownloadTimeout

from increcrawl_scrapy.geonode.errors import GeonodeError
from increcrawl_scrapy.geonode.payload import META_ANSWER
from increcrawl_scrapy.markdown import html_to_markdown
from increcrawl_scrapy.redirects import OffsiteRedirect
from increcrawl_scrapy.rows import PageState

#: Request meta: the URL as the row has it, and the row's key.
META_URL = "increcrawl_url"
META_KEY = "increcrawl_key"


def conditions(page: PageState) -> dict[str, str]:
    """Conditional headers for a page; none for a gone page (it may be back)."""
    headers: dict[str, str] = {}
    if page.gone:
        return headers
    if page.etag:
        headers["If-None-Match"] = page.etag
    if page.last_modified:
        headers["If-Modified-Since"] = page.last_modified
    return headers


def failure_kind(error: BaseException | None) -> tuple[int, bool]:
    """``(origin status or 0, whether the site failed)`` for a failed page fetch.
    Site failures back off; API and transport failures leave the page due."""
    if isinstance(error, HttpError):
        return error.response.status, True
    if isinstance(error, OffsiteRedirect):
        return error.status, True
    if isinstance(error, GeonodeError):
        return 0, error.site_failure
    if isinstance(error, DownloadTimeout):
        return 0, True  # the origin did not answer in DOWNLOAD_TIMEOUT
    return 0, False


def final_url_of(response: scrapy.http.Response) -> str | None:
    """Where the page was finally fetched from, when not the requested URL."""
    requested = response.meta.get(META_URL, response.url)
    answer = response.meta.get(META_ANSWER)
    final = mapping(mapping(answer).get("metadata")).get("url") if answer else response.url
    return final if isinstance(final, str) and final != requested else None


def markdown_of(response: scrapy.http.Response) -> str:
    """The page as markdown, whoever fetched it, so both paths hash the same text."""
    if isinstance(response, HtmlResponse):
        # Decoded the way Scrapy decodes it (header, BOM, meta, then detection).
        return html_to_markdown(response.text)
    if isinstance(response, TextResponse):  # markdown from the API, or plain text
        return response.text
    # Not text at all (a PDF, an image): its bytes still tell whether it changed.
    return f"binary sha256:{hashlib.sha256(response.body).hexdigest()}"


def header_of(response: scrapy.http.Response, name: str) -> str | None:
    value = response.headers.get(name)
    return value.decode("latin-1") if value else None


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
