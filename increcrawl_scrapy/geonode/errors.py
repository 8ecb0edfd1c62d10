"""Failures of the Geonode API, as exceptions Scrapy errbacks can tell apart.

No message ever contains the API key: it is only ever put in a request header.
"""

from __future__ import annotations

import re
from typing import Any

_ORIGIN_STATUS = re.compile(r"\bHTTP (\d{3})\b")

#: Extraction error codes that say something about the page or its site (it
#: blocked us, timed out, needs a login...), not about the API: the page backs off.
SITE_ERROR_CODES = frozenset(
    {
        "TEMPORARY_BLOCK",
        "NETWORK_ERROR",
        "CAPTCHA_CHALLENGE",
        "PERMANENT_BLOCK",
        "INVALID_URL",
        "INVALID_WAIT_FOR_SELECTOR",
        "WAIT_FOR_SELECTOR_TIMEOUT",
        "UNPROCESSABLE_CONTENT",
        "AUTH_REQUIRED",
        "TIMEOUT",
    }
)


def is_site_error_code(code: Any) -> bool:
    return code in SITE_ERROR_CODES


class GeonodeError(Exception):
    """Base of every Geonode API failure."""

    #: Whether the failure is the page's site's (it backs off), not the API's.
    site_failure = False


class GeonodeFatalError(GeonodeError):
    """The crawl cannot go on (bad key, quota exhausted): close with ``reason``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class GeonodeApiError(GeonodeError):
    """The API answered with an error that retrying will not fix."""

    def __init__(self, status: int, code: str | None, message: str, body: Any = None) -> None:
        super().__init__(f"Geonode API answered {status} {code or ''}: {message}".strip())
        self.status = status
        self.code = code
        self.body = body
        # A 422 extraction error names what went wrong with the page itself.
        self.site_failure = status == 422 and is_site_error_code(code)

    def origin_status(self) -> int | None:
        """The origin's HTTP status when the API reports it as an extraction error
        (``UNPROCESSABLE_CONTENT`` for an origin 304/404/410), else None."""
        if self.status != 422:
            return None
        error = self.body.get("error") if isinstance(self.body, dict) else None
        if not isinstance(error, dict):
            return None
        return origin_status_of(error.get("code"), error.get("message"), error.get("details"))


def origin_status_of(code: Any, message: Any, details: Any = None) -> int | None:
    """The origin status inside an ``UNPROCESSABLE_CONTENT`` extraction error:
    from ``details.http_status`` when present, else from ``HTTP nnn`` in the message."""
    if code != "UNPROCESSABLE_CONTENT":
        return None
    if isinstance(details, dict) and str(details.get("http_status", "")).isdigit():
        return int(details["http_status"])
    match = _ORIGIN_STATUS.search(str(message or ""))
    return int(match.group(1)) if match else None


class GeonodeRetriesExhausted(GeonodeError):
    """A retryable failure (429, 5xx, transport) outlasted ``GEONODE_MAX_RETRIES``."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.code = code  # the last extraction error code, if the API gave one
        self.site_failure = is_site_error_code(code)


class GeonodeBadAnswer(GeonodeError):
    """A 2xx answer that is not the documented JSON (missing or mistyped fields)."""


class GeonodeNoContent(GeonodeBadAnswer):
    """An answer for an origin 2xx without the content asked for: recorded, it would
    be the fingerprint of the empty string, every later edit invisible."""
