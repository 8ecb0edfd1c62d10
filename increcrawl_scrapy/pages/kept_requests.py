"""The requests a page's memory keeps (``memory.py``): those its response produced,
made again when it is skipped, and the one that reached it, made again to check it
(``unreached.py``); as JSON-ready data, copied as the spider yielded them."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from increcrawl_scrapy.geonode.payload import META_ANSWER


def request_data(request: Any, spider: Any) -> dict[str, Any] | None:
    """*request* as JSON-ready data (``Request.to_dict``, bytes as Latin-1 text), or
    None when it cannot be kept: a callback that is not a spider method, meta that
    is not plain data."""
    try:
        data = request.to_dict(spider=spider)
    except ValueError:
        return None
    data["body"] = data["body"].decode("latin-1")
    data["headers"] = {
        _text(name): [_text(value) for value in values] for name, values in data["headers"].items()
    }
    try:
        text = json.dumps(data, allow_nan=False)
    except (TypeError, ValueError):
        return None
    # A copy of the request as yielded: ``to_dict`` hands out the request's own meta
    # and cb_kwargs, which the downloader's middlewares fill in afterwards.
    copied: dict[str, Any] = json.loads(text)
    return copied


#: Headers of the request that reached a page that are not the crawl's way of asking:
#: the cookies of that moment (Scrapy's cookie jar adds the current ones, the
#: request's own ``cookies`` are kept), the validators of a conditional request, a
#: proxy's credentials (HttpProxyMiddleware sets them again from the meta's proxy).
_NOT_KEPT_HEADERS = frozenset(
    {"cookie", "if-none-match", "if-modified-since", "proxy-authorization"}
)
#: Meta keys Scrapy's components set on the way (download, redirect, retry, depth),
#: the Geonode API's answer (the page itself), and the check's own choices
#: (``pages/unreached.py``).
_NOT_KEPT_META = frozenset(
    {
        META_ANSWER,
        "depth",
        "download_latency",
        "download_slot",
        "redirect_times",
        "redirect_ttl",
        "redirect_urls",
        "redirect_reasons",
        "retry_times",
        "is_start_request",
        "dont_redirect",
        "handle_httpstatus_list",
        "handle_httpstatus_all",
    }
)


def kept_request(request: Any, spider: Any) -> dict[str, Any] | None:
    """The request that reached a page, to ask for it again as the crawl did
    (``request_data``, with neither callback nor errback): its method, URL, headers,
    body, cookies and the meta that is plain data, less what Scrapy's components set
    on the way (``_NOT_KEPT_HEADERS``, ``_NOT_KEPT_META``, private ``_`` keys and
    ours). None when it cannot be kept."""
    meta = {}
    for name, value in request.meta.items():
        if name in _NOT_KEPT_META or name.startswith(("_", "increcrawl_")):
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            continue  # not plain data (a proxy's objects, a browser's page...)
        meta[name] = value
    headers = {
        name: values
        for name, values in request.headers.items()
        if _text(name).lower() not in _NOT_KEPT_HEADERS
    }
    try:
        cleaned = request.replace(
            callback=None, errback=None, cb_kwargs={}, meta=meta, headers=headers
        )
    except (TypeError, ValueError):
        return None
    return request_data(cleaned, spider)


def request_of(data: dict[str, Any], spider: Any) -> Any:
    """The request *data* was made of (``request_from_dict``); ValueError if the
    spider no longer has its callback."""
    from scrapy.utils.request import request_from_dict

    data = dict(data)
    data["body"] = data["body"].encode("latin-1")
    data["headers"] = {
        name.encode("latin-1"): [value.encode("latin-1") for value in values]
        for name, values in data["headers"].items()
    }
    return request_from_dict(data, spider=spider)


def _text(value: bytes | str) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else value


#: Request meta keys of Scrapy and its components: not data a callback passes on.
_SCRAPY_META = frozenset(
    {
        "allow_offsite",
        "bindaddress",
        "cookiejar",
        "depth",
        "dont_cache",
        "dont_merge_cookies",
        "dont_obey_robotstxt",
        "dont_redirect",
        "dont_retry",
        "download_fail_on_dataloss",
        "download_latency",
        "download_maxsize",
        "download_slot",
        "download_timeout",
        "download_warnsize",
        "ftp_password",
        "ftp_user",
        "handle_httpstatus_all",
        "handle_httpstatus_list",
        "is_start_request",
        "link_text",  # CrawlSpider's rules
        "max_retry_times",
        "proxy",
        "redirect_reasons",
        "redirect_times",
        "redirect_ttl",
        "redirect_urls",
        "referrer_policy",
        "retry_times",
        "rule",
    }
)


def passes_data(data: dict[str, Any]) -> bool:
    """A request carrying what its callback scraped (``cb_kwargs``, meta of its
    own): its page is part of an item, its content is that data, not its links."""
    return bool(data.get("cb_kwargs")) or any(map(_own_meta, data.get("meta") or {}))


def _own_meta(name: str) -> bool:
    """A meta key of the spider's own (not Scrapy's, ours or private)."""
    return (
        name not in _SCRAPY_META
        and name != META_ANSWER
        and not name.startswith(("_", "increcrawl_"))
    )


#: The digest of what a request passes on (``passed_on``), set on it when it is asked.
PASSED_META = "increcrawl_passed"


def passed_on(request: Any) -> str | None:
    """A digest of the data *request* passes on to its callback (its ``cb_kwargs``
    and meta of the spider's own): part of the item its page makes, so the page is
    skipped or asked conditionally only while it is what the last fetch had. None
    when it passes nothing. A value that is not plain data is taken by its ``repr``
    (an object's may change every run: its page is then fetched)."""
    own = {name: value for name, value in request.meta.items() if _own_meta(name)}
    if not request.cb_kwargs and not own:
        return None
    text = json.dumps([request.cb_kwargs, own], sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
