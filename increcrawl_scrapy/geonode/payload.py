"""Mapping between Scrapy requests/responses and Geonode API bodies.

``is_routed`` is the one predicate that decides whether a request goes through
the API; every component asks it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.http import HtmlResponse, Request, Response, TextResponse

from increcrawl_scrapy.geonode.errors import GeonodeBadAnswer, GeonodeNoContent

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

CONDITIONAL_HEADERS = ("If-None-Match", "If-Modified-Since")
#: ``request.meta`` keys: per-request API parameters (or False), and the raw answer.
META_PARAMS = "geonode"
META_ANSWER = "geonode_api_response"


def is_routed(request: Request) -> bool:
    """Whether *request* is fetched through ``/v1/extract``."""
    params = request.meta.get(META_PARAMS, True)
    if params is False:
        return False
    if request.url.split("?", 1)[0].endswith("/robots.txt"):
        return False  # RobotsTxtMiddleware's own fetches
    return request.url.startswith(("http://", "https://"))


def formats_for(config: IncrecrawlConfig, spider: object) -> tuple[str, ...]:
    """``GEONODE_FORMATS`` if set; else the spider's own (``increcrawl_formats``: the
    incremental spider fingerprints markdown), else HTML, for selectors."""
    if config.formats is not None:
        return config.formats
    return tuple(getattr(spider, "increcrawl_formats", ("html",)))


def extract_body(
    request: Request, config: IncrecrawlConfig, formats: tuple[str, ...] = ("html",)
) -> dict[str, Any]:
    """The ``/v1/extract`` body for *request*: settings, then per-request overrides."""
    body: dict[str, Any] = {
        "url": request.url,
        "formats": list(formats),
        "render_js": config.render_js,
        "timeout": config.timeout_ms,
    }
    headers = conditional_headers(request)
    if headers:
        body["headers"] = headers
    params = request.meta.get(META_PARAMS)
    if isinstance(params, dict):
        body.update(params)
    return body


def conditional_headers(request: Request) -> dict[str, str]:
    found = {}
    for name in CONDITIONAL_HEADERS:
        value = request.headers.get(name)
        if value:
            found[name] = value.decode("latin-1")
    return found


def build_response(
    request: Request, answer: dict[str, Any], formats: tuple[str, ...] = ()
) -> Response:
    """A response with the request's identity: original URL, origin status,
    extracted content as body, the raw answer in ``meta``, flag ``geonode``.
    GeonodeNoContent when the origin answered 2xx (but 204) and none of *formats*
    (those asked for) is in the answer: no content is not an empty page."""
    metadata = answer.get("metadata")
    status = metadata.get("http_status") if isinstance(metadata, dict) else None
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        raise GeonodeBadAnswer(f"extract answer for {request.url} has no origin status")
    data = answer.get("data")
    if not isinstance(data, dict):
        data = {}
    ok = 200 <= status < 300 and status != 204
    if ok and formats and not any(isinstance(data.get(name), str) for name in formats):
        raise GeonodeNoContent(f"origin {status}, but no {' or '.join(formats)} as asked for")
    request.meta[META_ANSWER] = answer
    markdown, html = data.get("markdown"), data.get("html")
    # HTML when asked for (selectors work as on a direct response), else markdown.
    cls, body, kind = (
        (HtmlResponse, html, "text/html")
        if isinstance(html, str)
        else (TextResponse, markdown if isinstance(markdown, str) else "", "text/markdown")
    )
    return cls(
        url=request.url,
        status=status,
        body=body.encode("utf-8"),
        encoding="utf-8",
        request=request,
        flags=["geonode"],
        headers={"Content-Type": f"{kind}; charset=utf-8"},
    )


def origin_status_answer(request: Request, status: int, error: Any) -> dict[str, Any]:
    """An extract answer for an origin status the API reported as an error."""
    return {
        "data": {"markdown": None, "html": None},
        "metadata": {"url": request.url, "http_status": status},
        "tokens_charged": 0,
        "reported_as_error": error,
    }
