"""Links most of a host's pages share inside their text, from run to run: when most
of a host's pages change at once and those links changed with them, the run says
so in one warning line and points at ``INCRECRAWL_CONTENT_SELECTOR``. A list of the
site's pages that the page's main content keeps (outside any ``<nav>``) changes
every page when a page is added; a volatile pattern for that one link would miss the
next.

The links a host's pages share are the lines of links found on more than half of
the pages read in a run (the first ``SAMPLE`` of each host; past the first ``FIRST``
only lines already seen are counted, so the memory is bounded), remembered in the
state for the next run (``remember``; with several workers on one state, the last
to finish leaves its own). Only a host's shared links are compared: the pages' own
texts are never kept for this.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from increcrawl_scrapy.content.noise import LINKS_ADVICE, link_lines
from increcrawl_scrapy.urls import host_of

#: A host's pages whose links are read in a run.
SAMPLE = 200
#: Of those, the first ones whose every line of links is counted.
FIRST = 10
#: A run says so when more than this share of a host's checked pages changed...
MOST = 0.5
#: ... and at least this many (and a host's shared links are told from this many
#: pages at least: on fewer, every link of a page would be "shared").
MIN_CHANGED = 3
#: Lines of links shown in the warning, at most.
SHOWN = 4
_MARKER = re.compile(r"^(?:[-*+]|\d{1,4}[.)])[ \t]*")


@dataclass
class _Host:
    checked: int = 0
    changed: int = 0
    read: int = 0
    lines: Counter[str] = field(default_factory=Counter)

    def shared(self) -> list[str]:
        return sorted(line for line, n in self.lines.items() if n * 2 > self.read)


class SharedLinks:
    """One crawl's counts (on the reactor's thread: a bounded sample of pages)."""

    def __init__(self) -> None:
        self.hosts: dict[str, _Host] = {}

    def saw(self, url: str, text: str, *, changed: bool) -> None:
        """A page answered with *text*, reported changed or not."""
        host = self.hosts.setdefault(host_of(url.lower()), _Host())
        host.checked += 1
        host.changed += changed
        if host.read >= SAMPLE:
            return
        host.read += 1
        found = set(link_lines(text))
        if host.read > FIRST:
            found &= host.lines.keys()
        host.lines.update(found)

    def warnings(
        self, remembered: Callable[[str], str | None], remember: Callable[[str, str], None]
    ) -> list[str]:
        """One line per host where most pages changed and the links they share
        changed since the last run; each host's shared links remembered for the
        next (off the reactor's thread: they are read and written in the state)."""
        lines = []
        for name, host in sorted(self.hosts.items()):
            if host.read < MIN_CHANGED:
                continue  # too few pages to tell what most of them share
            key = f"shared_links:{name}"
            now = host.shared()
            before = _loads(remembered(key))
            most = host.changed >= MIN_CHANGED and host.changed > MOST * host.checked
            if before is not None and most and set(now) != set(before):
                moved = [f"new {_bare(line)}" for line in now if line not in before]
                moved += [f"gone {_bare(line)}" for line in before if line not in now]
                shown = "; ".join(moved[:SHOWN]) + ("; ..." if len(moved) > SHOWN else "")
                lines.append(
                    f"{name}: {host.changed:,} of {host.checked:,} pages changed at once, "
                    f"and the links most of them share changed ({shown}): {LINKS_ADVICE}"
                )
            remember(key, json.dumps(now))
        return lines


def _bare(line: str) -> str:
    """A line of links without its list marker."""
    return _MARKER.sub("", line, count=1)


def _loads(value: str | None) -> list[str] | None:
    try:
        found = json.loads(value) if value else None
    except ValueError:
        return None
    return found if isinstance(found, list) else None
