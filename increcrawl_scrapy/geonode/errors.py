"""Failures of the Geonode API, as exceptions Scrapy errbacks can tell apart.

No message ever contains the API key: it is only ever put in a request header.
"""

from __future__ import annotations

import re
from typing import Any

_ORIGIN_STATUS = re.compile(r"\bHTTP (\d{3})\b")


class GeonodeError(Exception):
    """Base of every Geonode API failure."""


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


class GeonodeBadAnswer(GeonodeError):
    """A 2xx answer that is not the documented JSON (missing or mistyped fields)."""
