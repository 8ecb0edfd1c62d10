"""The incremental spider's ``-a`` arguments beyond its sources: booleans read
strictly (``-a discover_only=maybe`` is an error, not false), and an argument the
spider does not know named in a warning (Scrapy would keep it as an attribute
nobody reads)."""

from __future__ import annotations

import difflib
from typing import Any

from increcrawl_scrapy.discovery.sources import SOURCES

#: The spider's yes/no arguments.
FLAGS = ("discover_only", "increcrawl_reset")
#: Every argument the incremental spider reads.
KNOWN = (*SOURCES, "seed", *FLAGS)
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def flag(name: str, value: Any) -> bool:
    """*value* of the boolean argument *name*; ValueError, naming it, if it is
    not one of 1/0, true/false, yes/no, on/off (any case)."""
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"-a {name}: {value!r} is not a yes/no value (give 1/0, true/false, yes/no)")


def unknown_arguments(spider_class: type, arguments: dict[str, Any]) -> list[str]:
    """A warning for each argument neither the spider nor its class knows.

    Names starting with ``_`` are Scrapyd's (``_job``); a subclass's own arguments
    are the attributes it declares, the way Scrapy spiders take arguments."""
    known = sorted(KNOWN)
    warnings = []
    for name in sorted(arguments):
        if name.startswith("_") or name in KNOWN or hasattr(spider_class, name):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        warnings.append(
            f"Unknown spider argument {name} is ignored ({hint}the arguments are "
            f"{', '.join(known)})"
        )
    return warnings
