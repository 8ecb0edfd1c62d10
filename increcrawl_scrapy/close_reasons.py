"""Why a crawl ended, as cron reads it: each close reason the package gives a crawl
(its ``finish_reason``) and the exit code ``scrapy crawl`` returns for it.

Embedding projects get the same close reasons; their exit code is Scrapy's.
"""

from __future__ import annotations

FINISHED = "finished"
#: No discovery source could be read (a sitemap that 404s, is not XML...).
DISCOVERY_FAILED = "discovery_failed"
#: The sitemaps listed pages and every one was refused (another site's, say).
NOTHING_DISCOVERED = "nothing_discovered"
BAD_KEY = "geonode_bad_key"
QUOTA_EXHAUSTED = "geonode_quota_exhausted"
#: The API stayed down through the circuit breaker's probes.
API_UNREACHABLE = "geonode_unreachable"
#: More than INCRECRAWL_MAX_ERROR_RATIO of the run's fetches failed.
TOO_MANY_ERRORS = "too_many_errors"
#: Another crawl holds the state database (an embedding project's crawl meets it
#: when it opens; ``scrapy crawl`` in this project checks before it starts).
IN_USE = "database_in_use"

#: Bad input (arguments, settings, the database file): one line, before the crawl.
BAD_INPUT = 2
#: The database is in use by another crawl: EX_TEMPFAIL, "try later", not an alarm.
DATABASE_IN_USE = 75

EXIT_CODES = {
    DISCOVERY_FAILED: 3,
    NOTHING_DISCOVERED: 3,
    BAD_KEY: 4,
    QUOTA_EXHAUSTED: 4,
    API_UNREACHABLE: 5,
    TOO_MANY_ERRORS: 6,
    IN_USE: DATABASE_IN_USE,
}

#: Close reasons of the crawls this process ran (the crawl command reads them).
seen: list[str] = []


def exit_code(reasons: list[str]) -> int:
    """The exit code for crawls that ended for *reasons* (the gravest wins)."""
    return max((EXIT_CODES.get(reason, 0) for reason in reasons), default=0)
