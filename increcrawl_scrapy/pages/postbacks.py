"""Postbacks: the requests to a page's URL that are not the page.

A page with state is the answer to its URL's GET. A form posted to the same URL
(an ASP.NET pager's ``__EVENTTARGET``, a search form posting to its own page), or
any request with a body, asks that URL something else: Scrapy's dupefilter and HTTP
cache tell it apart by its request fingerprint, and so does the add-on. Such a
request is never skipped nor asked conditionally (``skip_not_due.py``), and its
answer never stands for the page (its 404 is not the page gone, its validators
are not the page's). The items it yields for its own URL (without a URL field, or
naming it) are a page of their own, keyed by the URL and the request's fingerprint
(``PAGE#item:request=FINGERPRINT``): matched against that same request's last
answer, so an edit on page 2 of a postback listing is ``changed`` there, and never
mixed with the GET page's items. Like an item row, that row is never due on its
own (it is fetched whenever the spider sends the request) and never requested
directly. The fingerprint is taken without the fields a server fills with its own
state (``SERVER_STATE_FIELDS``: ASP.NET's ``__VIEWSTATE``, CSRF tokens): they change
with the page's content or at every render, not with what the form asks, and page 2
is page 2 whatever its view state (with them, every postback page's items came
``new`` after any edit of the listing, and the old ones never ``gone``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode

from increcrawl_scrapy.crawl.shared_state import crawl_state
from increcrawl_scrapy.schedule.rows import ITEM_MARK
from increcrawl_scrapy.state import StateLockedError

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

#: The key of a postback's page: its URL's key, this, the request's fingerprint.
POSTBACK_MARK = f"{ITEM_MARK}request="


def is_postback(request: Request | None) -> bool:
    """Whether *request* is not its URL's page: another method than GET, or a body."""
    return request is not None and (request.method != "GET" or bool(request.body))


def fingerprint(crawler: Crawler, request: Request) -> bytes:
    """Scrapy's own fingerprint of *request* (its dupefilter's, its HTTP cache's)."""
    fingerprinter = crawler.request_fingerprinter
    assert fingerprinter is not None  # set once the crawler is configured
    return fingerprinter.fingerprint(request)


#: Hidden fields a server fills with its own state, not what a form asks.
SERVER_STATE_FIELDS = frozenset(
    {
        b"__VIEWSTATE",
        b"__VIEWSTATEGENERATOR",
        b"__VIEWSTATEENCRYPTED",
        b"__EVENTVALIDATION",
        b"__PREVIOUSPAGE",
        b"__REQUESTDIGEST",
        b"csrf_token",
        b"csrfmiddlewaretoken",
        b"authenticity_token",
    }
)


def postback_key(crawler: Crawler, page_key: str, request: Request) -> str:
    """The row of the items *request* (a postback) yields for its own URL."""
    return f"{page_key}{POSTBACK_MARK}{fingerprint(crawler, _asked(request)).hex()[:16]}"


def _asked(request: Request) -> Request:
    """*request* less the server's state fields of its form body."""
    kind = request.headers.get(b"Content-Type") or b""
    if not kind.startswith(b"application/x-www-form-urlencoded"):
        return request
    fields = parse_qsl(request.body, keep_blank_values=True)
    asked = [(name, value) for name, value in fields if name not in SERVER_STATE_FIELDS]
    return request if len(asked) == len(fields) else request.replace(body=urlencode(asked))


def postback_row(crawler: Crawler, response: Response) -> str | None:
    """The row of a postback's items for its own URL; None for the page's own GET,
    or a URL that is no page's."""
    request = response.request
    if request is None or not is_postback(request):
        return None
    try:
        page_key = crawl_state(crawler).store.normalize(response.url)
    except (StateLockedError, ValueError):
        return None
    return postback_key(crawler, page_key, request)
