"""Every stats key the package emits, named in one place.

Keys are ``prefix/noun[/qualifier]``; a ``{...}`` part is filled in when counted
(``increcrawl/sitemap/skipped/{reason}``). docs/reference/stats.md documents each of
them (the docs build and tests/package/test_docs.py check it), and every crawl in the test
suite checks that it emitted no other.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

# Discovery
DISCOVERED = "increcrawl/discovered"
INVALID_URLS = "increcrawl/invalid_urls"
DISCOVERY_INCOMPLETE = "increcrawl/discovery_incomplete"
DISCOVERY_ELSEWHERE = "increcrawl/discovery_by_another_worker"
LEASES_LOST = "increcrawl/leases_lost"
SITEMAPS = "increcrawl/sitemaps"
SITEMAP_UNCHANGED = "increcrawl/sitemap/unchanged"
SITEMAP_NOT_MODIFIED = "increcrawl/sitemap/not_modified"
SITEMAP_ERRORS = "increcrawl/sitemap/errors"
SITEMAP_INVALID = "increcrawl/sitemap/invalid"
SITEMAP_OFFSITE = "increcrawl/sitemap/offsite"
SITEMAP_REPEATED = "increcrawl/sitemap/repeated"
#: The same document as a sitemap already read this run, under another URL.
SITEMAP_DUPLICATE = "increcrawl/sitemap/duplicate"
SITEMAP_TOO_DEEP = "increcrawl/sitemap/too_deep"
SITEMAP_SKIPPED = "increcrawl/sitemap/skipped/{reason}"
SITEMAP_RECOVERED = "increcrawl/sitemap/recovered"
SITEMAP_FEEDS = "increcrawl/sitemap/feeds"
SITEMAP_NOT_FOLLOWED = "increcrawl/sitemap/not_followed"
ROBOTS_ERRORS = "increcrawl/robots/errors"
MAP_ERRORS = "increcrawl/map/errors"
MAP_SKIPPED = "increcrawl/map/skipped/{reason}"
LASTMOD_MOVED = "increcrawl/lastmod/moved"
LASTMOD_DUE = "increcrawl/lastmod/due"
LASTMOD_WAVES = "increcrawl/lastmod/waves"
LASTMOD_SAMPLED = "increcrawl/lastmod/sampled"
MISSING = "increcrawl/missing"
MISSING_DUE = "increcrawl/missing_due"
REKEYED = "increcrawl/rekeyed"
REKEY_MERGED = "increcrawl/rekey_merged"
# The queue and the results
DUE = "increcrawl/due"
DUE_GONE = "increcrawl/due_gone"
#: Due rows not fetched: ``excluded`` by INCRECRAWL_ALLOW/DENY, ``robots`` (robots.txt).
SKIPPED = "increcrawl/skipped/{reason}"
BUDGET_LEFT = "increcrawl/budget/left"
BUDGET_LONGEST_WAIT = "increcrawl/budget/longest_wait_s"
TOKENS_LEFT = "increcrawl/budget/tokens_left"
#: INCRECRAWL_MONTHLY_TOKENS: the run's share, what the month had left at its start,
#: and the due pages left for a later run because the share was spent.
MONTH_SHARE = "increcrawl/budget/month_share"
MONTH_TOKENS_LEFT = "increcrawl/budget/month_tokens_left"
MONTH_LEFT = "increcrawl/budget/month_left"
NEW = "increcrawl/new"
CHANGED = "increcrawl/changed"
UNCHANGED = "increcrawl/unchanged"
GONE = "increcrawl/gone"
ERRORS = "increcrawl/errors"
BACKED_OFF = "increcrawl/errors/backed_off"
REDIRECT_OFFSITE = "increcrawl/redirect/offsite"
#: Items delivered without state: no usable page URL in INCRECRAWL_URL_FIELD.
ITEMS_WITHOUT_URL = "increcrawl/items/without_url"
CONTENT_FOUND = "increcrawl/content/{how}"  # how a page's text was taken (page_text.py)
#: Pages nested deeper than the tree holds: flattened (content/parse.py), text kept.
CONTENT_FLATTENED = "increcrawl/content/flattened"
TOO_LARGE = "increcrawl/pages/too_large"  # over INCRECRAWL_MAX_PAGE_BYTES
EMPTY_PAGES = "increcrawl/pages/empty"  # a 200 with no HTML document: a site failure
#: Pages a library failed on as their text was taken (content/page_text.ContentFailed).
CONTENT_FAILED = "increcrawl/pages/content_failed"
#: Pages a content process ended on, twice (crawl/content_processes.py): they back off.
CONTENT_WORKER_LOST = "increcrawl/pages/content_worker_lost"
#: The worker processes ``INCRECRAWL_CONTENT_PROCESSES = auto`` chose (content_processes.py).
CONTENT_PROCESSES = "increcrawl/content_processes"
#: Pages whose texts a worker process took (the others: the content thread's).
CONTENT_IN_WORKERS = "increcrawl/content_processes/pages"
NO_TEXT = "increcrawl/pages/no_text"  # a page whose text is empty: recorded, and said
LISTINGS = "increcrawl/pages/listings/{change}"  # links only, a schedule of their own
ALIASES = "increcrawl/pages/aliases"  # rel=canonical names another page, with its text
#: rel=canonical names another page whose text differs, or that is not crawled: the
#: page is reported as a page of its own.
ALIASES_REFUSED = "increcrawl/pages/aliases_refused"
#: Canonical pages asked to compare an alias with (their stored text was not its).
CANONICAL_ASKED = "increcrawl/pages/canonical_asked"
#: Pages asked that answered 404/410 (or "not found") and never anything else: a dead
#: entry of a sitemap or link, kept gone and never reported (nothing to delete).
NEVER_FOUND = "increcrawl/pages/never_found"
SOFT_404 = "increcrawl/pages/soft_404"  # a 200 with the site's "not found" page: gone
NOT_FOUND_PROBES = "increcrawl/soft_404/probes"  # pages that cannot exist, asked for
#: The probe's answer was the home page: a catch-all site, soft 404s not judged.
NOT_FOUND_CATCH_ALL = "increcrawl/soft_404/catch_all"
PATTERN_TIMEOUTS = "increcrawl/pages/pattern_timeouts"  # a user's rule took too long
REBASELINED = "increcrawl/pages/rebaselined"  # a new fingerprint scheme: new baseline
#: Pages whose fingerprint was of an old text scheme at the start: re-read whole.
OLD_FINGERPRINTS = "increcrawl/pages/old_fingerprints"
#: Items not delivered: identical to one of their page's previous version.
ITEMS_UNCHANGED = "increcrawl/items/unchanged"
#: Items that moved to another page (a gone one there, identical): not delivered.
ITEMS_MOVED = "increcrawl/items/moved"
#: Items that reached the feeds (``item_scraped``), by their ``change`` label.
ITEMS_DELIVERED = "increcrawl/items/delivered/{change}"
#: New and gone items still held at a close (``pages/moved.py``): their pages stay
#: due, and their next fetch delivers them.
ITEMS_HELD_OVER = "increcrawl/items/held_over"
#: Items a run could not hold for a later one, past the PRINTS * MAX_HELD a run
#: adds (``pages/moved.py``, ``held_cap.py``; earlier runs' are always kept).
ITEMS_PAST_HELD_CAP = "increcrawl/items/past_held_cap"
#: Items of a page another response gave already this run (an item two listings list).
ITEMS_LISTED_AGAIN = "increcrawl/items/listed_again"
#: Requests a skipped (not due, or 304) page produced last time, made again.
REPLAYED = "increcrawl/replayed"
#: The pages (canonical URLs) those requests lead to: most are repeats.
REPLAYED_PAGES = "increcrawl/replayed_pages"
UNREACHED_CHECKED = "increcrawl/unreached/checked"
UNREACHED_REPLAYED = "increcrawl/unreached/replayed_only"
UNREACHED_RECENT = "increcrawl/unreached/replayed_recent"
# Batch jobs
BATCH_FAILED = "increcrawl/batch/failed"
BATCH_CANCELLED = "increcrawl/batch/cancelled"
BATCH_TIMEOUTS = "increcrawl/batch/timeouts"
BATCH_ERRORS = "increcrawl/batch/errors"
BATCH_BAD_RESULTS = "increcrawl/batch/bad_results"
BATCH_REPEATED_RESULTS = "increcrawl/batch/repeated_results"
BATCH_MISSING_RESULTS = "increcrawl/batch/missing_results"
# Hybrid fetching (spiders/hybrid_fetch.py)
HYBRID_PROBES = "increcrawl/hybrid/probes"  # pages asked directly first (free)
HYBRID_SAVED = "increcrawl/hybrid/saved"  # probes that answered the check: no token
#: Pages extracted through Geonode, by why: new, changed, blocked, challenge, shell,
#: failed (the probe's), host (a host not probed).
HYBRID_EXTRACTIONS = "increcrawl/hybrid/extractions/{reason}"
HYBRID_AGREED = "increcrawl/hybrid/agreed"  # a probe saw what Geonode sees
HYBRID_DIFFERED = "increcrawl/hybrid/differed"  # ... and did not: the host is not probed
# The Geonode API
API_REQUESTS = "geonode/requests"
API_STATUS = "geonode/status/{code}"
API_RETRIES = "geonode/retries"
API_BACKOFF_MS = "geonode/retries/backoff_ms"
API_TRANSPORT_ERRORS = "geonode/errors/transport"
API_BAD_ANSWERS = "geonode/errors/bad_answer"
#: Answers for an origin 2xx without the content asked for (payload.py): each try.
API_NO_CONTENT = "geonode/errors/no_content"
API_TOKENS = "geonode/tokens_charged"
API_BATCH_JOBS = "geonode/batch/jobs"

#: A page's ``change`` label -> its counter.
BY_CHANGE = {"new": NEW, "changed": CHANGED, "unchanged": UNCHANGED, "gone": GONE}
#: A column of the ``runs`` table -> the counter it is filled from.
BY_RUN_COUNT = {
    **BY_CHANGE,
    "discovered": DISCOVERED,
    "errors": ERRORS,
    "due": DUE,
    "api_requests": API_REQUESTS,
    "tokens_charged": API_TOKENS,
}

ALL_KEYS: tuple[str, ...] = tuple(
    value for name, value in dict(globals()).items() if name.isupper() and isinstance(value, str)
)
_KNOWN = re.compile("|".join(re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(key)) for key in ALL_KEYS))


def inc(stats: StatsCollector | None, key: str, count: int = 1, **parts: object) -> None:
    """Add *count* to *key* (its ``{...}`` parts filled from *parts*)."""
    if count and stats is not None:
        stats.inc_value(key.format(**parts) if parts else key, count)


def inc_result(stats: StatsCollector | None, change: str, *, never_found: bool) -> None:
    """Count a page's recorded result under its *change* label, and a page never found
    (``Recorded.never_found``)."""
    inc(stats, BY_CHANGE[change])
    if never_found:
        inc(stats, NEVER_FOUND)


def is_known(key: str) -> bool:
    """Whether *key* is one of ours (for keys with our prefixes)."""
    return _KNOWN.fullmatch(key) is not None
