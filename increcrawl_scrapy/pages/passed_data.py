"""The data a request passes on to its callback (``cb_kwargs``, meta of the spider's
own: a price read on a catalogue, an item half built): part of the items its page
makes. A response whose requests pass data on is no listing (``listings.py``), and
a page of items is skipped or asked conditionally (``skip_not_due.py``) only while
the request reaching it passes on what the same page passed at the page's last
fetch: each page the data comes from (its ``Referer``) has its digest in the
page's memory, as several listings may lead to one page in whichever order they
answer, Scrapy sending the first request and dropping the others."""

from __future__ import annotations

import datetime
import decimal
import enum
import hashlib
import json
import os
import uuid
from typing import Any

from itemadapter import ItemAdapter, is_item

from increcrawl_scrapy.geonode.payload import META_ANSWER

#: Each source's digest of what a request passes on, set on it when it is asked.
PASSED_META = "increcrawl_passed"
#: Sources a page's memory keeps (the pages leading to it with data).
MAX_SOURCES = 16


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
        "ftp_local_filename",
        "ftp_passive",
        "ftp_password",
        "ftp_user",
        "handle_httpstatus_all",
        "handle_httpstatus_list",
        "http_auth_domain",
        "http_pass",
        "http_user",
        "is_secure",
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
        "verbatim_url",
    }
)


def passes_data(data: dict[str, Any]) -> bool:
    """A request carrying what its callback scraped (``cb_kwargs``, meta of its
    own): its page is part of an item, its content is that data, not its links."""
    return bool(data.get("cb_kwargs")) or any(map(_own_meta, data.get("meta") or {}))


#: Meta keys of well-known download handlers and middlewares: how to fetch, not data
#: (scrapy-playwright, scrapy-zyte-api, scrapy-splash, scrapy-impersonate, AutoThrottle).
_COMPONENTS_META = frozenset({"splash", "impersonate", "autothrottle_dont_adjust_delay"})
_COMPONENTS_PREFIXES = ("playwright", "zyte_api")


def _own_meta(name: str) -> bool:
    """A meta key of the spider's own (not Scrapy's, a known component's, ours or
    private)."""
    return (
        name not in _SCRAPY_META
        and name not in _COMPONENTS_META
        and name != META_ANSWER
        and not name.startswith(("_", "increcrawl_", *_COMPONENTS_PREFIXES))
    )


def source_of(request: Any) -> str:
    """The page *request* comes from (its ``Referer``, as Scrapy's spider
    middlewares set it), or "" (a start request)."""
    referer = request.headers.get("Referer")
    return referer.decode("latin-1") if isinstance(referer, bytes) else ""


def passed_on(request: Any) -> str | None:
    """A digest of the data *request* passes on, None when it passes nothing. Taken
    from the data's structure (items, dataclasses and attrs by their fields): an
    object that is not plain data (a Selector, a Response) gets a digest of its own
    each time, so its page is fetched whole whenever its source is known."""
    own = {name: value for name, value in request.meta.items() if _own_meta(name)}
    if not request.cb_kwargs and not own:
        return None
    try:
        text = json.dumps([_plain(request.cb_kwargs), _plain(own)], sort_keys=True)
    except (TypeError, ValueError, RecursionError):  # no structure, a cycle: never the same
        return "?" + os.urandom(8).hex()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _plain(value: Any) -> Any:
    """*value* as JSON data, by its structure; TypeError for anything else."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, _BY_TEXT):  # a value whose text is the value
        return {type(value).__name__: str(value)}
    if isinstance(value, enum.Enum):
        return {type(value).__name__: value.name}
    if isinstance(value, list | tuple):
        return [_plain(part) for part in value]
    if isinstance(value, set | frozenset):
        return sorted((_plain(part) for part in value), key=json.dumps)
    if isinstance(value, dict) or is_item(value):
        fields = ItemAdapter(value).items() if is_item(value) else value.items()
        return {_key(name): _plain(part) for name, part in fields}
    raise TypeError(f"not plain data: {type(value).__name__}")


def _key(name: Any) -> str:
    return str(name)  # as JSON has it (a replay's data went through JSON)


_BY_TEXT = (decimal.Decimal, datetime.date, datetime.time, datetime.timedelta, uuid.UUID)


def mismatch(known: dict[str, str] | None, request: Any) -> bool:
    """Whether *request* passes on other data than its source passed at its page's
    last fetch (*known*), or data from a source not seen yet (a listing moved, a
    second category, a memory of an earlier version): its page is fetched whole,
    and that source's data kept with the page's items from then on, so which of a
    page's sources reaches it first in a run changes nothing."""
    source, mine = _stamped(request)
    return (known or {}).get(source) != mine


def remember(known: dict[str, str] | None, request: Any) -> None:
    """Set on *request* the sources' digests its page's memory keeps if it is
    fetched: *known* with its own (``PASSED_META``, read when the page is recorded)."""
    source, mine = _stamped(request)
    if mine is not None and known:
        kept = {**known, source: mine}
        request.meta[PASSED_META] = dict(list(kept.items())[-MAX_SOURCES:])


def _stamped(request: Any) -> tuple[str, str | None]:
    """*request*'s source and the digest ``stamp`` set for it."""
    source = source_of(request)
    return source, (request.meta.get(PASSED_META) or {}).get(source)


def stamp(request: Any) -> None:
    """Set on *request* the digest of what it passes on, by its source."""
    digest = passed_on(request)
    if digest is not None:
        request.meta[PASSED_META] = {source_of(request): digest}
