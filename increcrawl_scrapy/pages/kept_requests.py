"""The requests a page's memory keeps (``memory.py``): those its response produced,
made again when it is skipped, and the one that reached it, made again to check it
(``unreached.py``); as JSON-ready data, copied as the spider yielded them."""

from __future__ import annotations

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
