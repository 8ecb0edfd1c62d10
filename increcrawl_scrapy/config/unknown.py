"""A misspelled ``INCRECRAWL_*`` / ``GEONODE_*`` setting is otherwise silently
ignored: each unknown one gets a warning naming the closest known name."""

from __future__ import annotations

import difflib
import logging

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import DEFAULTS

logger = logging.getLogger(__name__)

#: Settings of ours that are not in DEFAULTS but are read (Scrapy's own or the API's).
_ALSO_KNOWN = frozenset({"GEONODE_API_KEY", "GEONODE_API_URL"})
#: Settings that did something once and do nothing now: why, said when one is set.
DEPRECATED = {
    "INCRECRAWL_REVIVE_GONE": "a gone page that is still listed is re-checked on a slow "
    "schedule and comes back as new",
    "INCRECRAWL_CONTENT_WORKER": "pages' texts are taken by INCRECRAWL_CONTENT_PROCESSES "
    "worker processes (0: on one thread)",
    "INCRECRAWL_CONTENT_TIMEOUT": "it limited the old content process; a page's "
    "work is bounded by INCRECRAWL_MAX_PAGE_BYTES and linear rules",
}


def warn_unknown_settings(settings: BaseSettings) -> list[str]:
    """Warn about each setting with our prefixes that the package does not know."""
    known = set(DEFAULTS) | _ALSO_KNOWN
    warnings = []
    for name in sorted(settings.attributes):
        if name in DEPRECATED:
            warnings.append(f"{name} is deprecated and does nothing: {DEPRECATED[name]}")
            logger.warning(warnings[-1])
            continue
        if not name.startswith(("INCRECRAWL_", "GEONODE_")) or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.append(f"Unknown setting {name} is ignored{hint}")
        logger.warning(warnings[-1])
    return warnings
