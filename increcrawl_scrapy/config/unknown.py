"""A misspelled ``INCRECRAWL_*`` / ``GEONODE_*`` setting is otherwise silently
ignored: each unknown one gets a warning naming the closest known name."""

from __future__ import annotations

import difflib
import logging

from scrapy.settings import BaseSettings

from increcrawl_scrapy.config import DEFAULTS

logger = logging.getLogger(__name__)

#: Settings of ours that are not in DEFAULTS but are read (Scrapy's own or the API's).
_ALSO_KNOWN = frozenset({"GEONODE_API_KEY", "GEONODE_API_URL", "INCRECRAWL_REVIVE_GONE"})


def warn_unknown_settings(settings: BaseSettings) -> list[str]:
    """Warn about each setting with our prefixes that the package does not know."""
    known = set(DEFAULTS) | _ALSO_KNOWN
    warnings = []
    for name in sorted(settings.attributes):
        if not name.startswith(("INCRECRAWL_", "GEONODE_")) or name in known:
            continue
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        warnings.append(f"Unknown setting {name} is ignored{hint}")
        logger.warning(warnings[-1])
    return warnings
