"""Expected failures in one line: a host that refuses connections, has no address or
does not answer is said by the message alone, without the traceback Scrapy's
robots.txt middleware adds to it (two chained ones for one refused connection, on a
newcomer's first run against a wrong URL). Its exit code and summary say the rest."""

from __future__ import annotations

import logging

import scrapy.exceptions
from twisted.internet.error import ConnectError, ConnectionLost, DNSLookupError, TimeoutError

#: Network failures of a host, in Scrapy's own names (2.13 raises Twisted's).
EXPECTED: tuple[type[BaseException], ...] = (
    ConnectError,
    ConnectionLost,
    DNSLookupError,
    TimeoutError,
    *(
        getattr(scrapy.exceptions, name)
        for name in (
            "DownloadConnectionRefusedError",
            "CannotResolveHostError",
            "DownloadTimeoutError",
            "DownloadFailedError",
        )
        if hasattr(scrapy.exceptions, name)
    ),
)
#: The loggers that add a traceback to a network failure.
LOGGERS = ("scrapy.downloadermiddlewares.robotstxt",)


class OneLine(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], EXPECTED):
            record.exc_info = record.exc_text = None
        return True


_ONE_LINE = OneLine()


def in_one_line() -> None:
    """Say expected network failures without a traceback (once per process)."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _ONE_LINE not in logger.filters:
            logger.addFilter(_ONE_LINE)
