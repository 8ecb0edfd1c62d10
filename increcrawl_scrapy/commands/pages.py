"""``scrapy increcrawl diff URL`` and ``scrapy increcrawl noisy``: what changed on a
page, and the pages that "change" on every fetch. Both read the database
read-only and need kept content (``INCRECRAWL_KEEP_CONTENT``) for the texts."""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
import time
from functools import partial
from typing import Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.commands.opening import config_of, exists, read_only
from increcrawl_scrapy.content.noise import LINKS_ADVICE, differing_lines, propose
from increcrawl_scrapy.state import KeptVersions, StateReader, driver_errors, shown
from increcrawl_scrapy.urls import normalization_settings, normalize_url

NO_CONTENT = "set INCRECRAWL_KEEP_CONTENT=True: each page's text is kept from its next fetch on"


def diff(settings: BaseSettings, url: str | None) -> int:
    """A unified diff of *url*'s last change."""
    config = config_of(settings)
    if config is None:
        return close_reasons.BAD_INPUT
    if not url:
        print("scrapy increcrawl diff needs a URL")
        return close_reasons.BAD_INPUT
    if not exists(config):
        return 1
    try:
        reader = read_only(config)
        key = stored_key(reader, config, url)
    except driver_errors() as exc:
        print(f"Cannot read {shown(config.db_path)}: {exc}")
        return 1
    except ValueError as exc:
        print(f"Not a page URL: {url} ({exc})")
        return close_reasons.BAD_INPUT
    try:
        known = reader.page(key)
        kept = reader.last_change(key) if known else None
        row = reader.pages_by_ids([known[0]]).get(known[0]) if known else None
    except driver_errors() as exc:
        print(f"Cannot read {shown(config.db_path)}: {exc}")
        return 1
    if not known:
        print(f"No page {url} in {shown(config.db_path)}")
        return 1
    if row is not None and row["gone"]:
        return _gone(url, row, kept)
    if kept is None:
        print(f"No kept content for {url}: {NO_CONTENT}")
        return 1
    if kept.previous is None:
        print(f"{url} has not changed since its text was first kept ({_when(kept)})")
        return 0
    sys.stdout.writelines(diff_lines(url, kept))
    return 0


def _gone(url: str, row: dict[str, Any], kept: KeptVersions | None) -> int:
    """A gone page: since when, and (with kept content) its last text, removed."""
    at = row["last_changed"] or row["last_fetched"]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at)) if at else "-"
    print(f"{url} is gone (HTTP {row['last_status'] or '-'} on {when})")
    if kept is None:
        print(f"No kept content for {url}: {NO_CONTENT}")
        return 0
    sys.stdout.writelines(
        difflib.unified_diff(
            _ending(kept.text).splitlines(keepends=True),
            [],
            fromfile=f"{url} (its last kept text)",
            tofile=f"{url} (gone {when})",
        )
    )
    return 0


def stored_key(reader: StateReader, config: Any, url: str) -> str:
    """*url*'s row key, made as the state's keys were made (the settings stored
    with it), not by the shell's settings; ValueError if it is not a page URL."""
    return reader.key_of(url, partial(normalize_url, **normalization_settings(config)))


def diff_lines(url: str, kept: KeptVersions) -> list[str]:
    """The unified diff of a page's last change (``diff``, and the report's diffs)."""
    return list(
        difflib.unified_diff(
            _ending(kept.previous or "").splitlines(keepends=True),
            _ending(kept.text).splitlines(keepends=True),
            fromfile=f"{url} (before)",
            tofile=f"{url} (changed {_when(kept)})",
        )
    )


def noisy(settings: BaseSettings, opts: argparse.Namespace) -> int:
    """Pages reported changed on ``--min-streak`` fetches in a row, the lines that
    differed between their last two versions, and volatile patterns that would
    have made those versions equal (checked before they are proposed)."""
    config = config_of(settings)
    if config is None:
        return close_reasons.BAD_INPUT
    if opts.min_streak < 2:
        print("--min-streak must be 2 or more (one change is news, not noise)")
        return close_reasons.BAD_INPUT
    if not exists(config):
        return 1
    try:
        reader = read_only(config)
        if opts.seed and not reader.has_seed(opts.seed):
            print(f"No pages of seed {opts.seed!r} in {shown(config.db_path)}")
            return 1
        rows = reader.noisy_pages(opts.min_streak, opts.seed)
        pages = [_page(row, reader.last_change(row["normalized_url"]), config) for row in rows]
    except driver_errors() as exc:
        print(f"Cannot read {shown(config.db_path)}: {exc}")
        return 1
    pairs = [page.pop("_pair") for page in pages]
    known = [pair for pair in pairs if pair is not None]
    proposed = sorted({p for page in pages for p in page["proposed"]})
    every = (*config.volatile_patterns, *proposed)
    settled = sum(1 for a, b in known if not differing_lines(a, b, every).added) if proposed else 0
    report = {
        "min_streak": opts.min_streak,
        "pages": pages,
        "proposed_patterns": proposed,
        "pages_made_equal": settled,
        "pages_with_content": len(known),
    }
    print(json.dumps(report, indent=2) if opts.json else _text(report))
    return 0


def _page(row: dict[str, Any], kept: KeptVersions | None, config: Any) -> dict[str, Any]:
    page: dict[str, Any] = {
        "url": row["url"],
        "streak": row["change_streak"],
        "changes": row["change_count"],
        "fetches": row["fetch_count"],
        "removed": [],
        "added": [],
        "proposed": [],
        "links_only": False,
        "_pair": None,
    }
    if kept is not None and kept.previous is not None:
        difference = differing_lines(kept.previous, kept.text, config.volatile_patterns)
        page.update(
            removed=list(difference.removed),
            added=list(difference.added),
            proposed=propose([(kept.previous, kept.text)], config.volatile_patterns),
            links_only=difference.links_only,
            _pair=(kept.previous, kept.text),
        )
    return page


def _text(report: dict[str, Any]) -> str:
    pages = report["pages"]
    if not pages:
        return f"No page changed on {report['min_streak']} or more fetches in a row"
    lines = [
        f"{len(pages)} page{'s' if len(pages) != 1 else ''} changed on "
        f"{report['min_streak']} or more fetches in a row:"
    ]
    for page in pages:
        lines.append(
            f"{page['url']}: changed {page['streak']} fetches in a row "
            f"({page['changes']} changes in {page['fetches']} fetches)"
        )
        if not page["removed"] and not page["added"]:
            lines.append(f"  (no texts to compare: {NO_CONTENT})")
        lines += [f"  - {line}" for line in page["removed"]]
        lines += [f"  + {line}" for line in page["added"]]
    linked = sum(1 for page in pages if page["links_only"])
    if linked:
        known = report["pages_with_content"]
        lines.append(f"{linked} of {known} pages differ in links only: {LINKS_ADVICE}")
    if report["proposed_patterns"]:
        lines.append(
            f"These patterns make the last two versions of {report['pages_made_equal']} of "
            f"{report['pages_with_content']} pages equal; add them to "
            "INCRECRAWL_VOLATILE_PATTERNS if what they match is never news:"
        )
        lines += [f"  {pattern}" for pattern in report["proposed_patterns"]]
        setting = f"INCRECRAWL_VOLATILE_PATTERNS={json.dumps(report['proposed_patterns'])}"
        lines.append(f"  as a command-line setting: -s {shlex.quote(setting)}")
    elif report["pages_with_content"] > linked:
        lines.append("No pattern found that makes their versions equal: whole lines differ")
    return "\n".join(lines)


def _when(kept: KeptVersions) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(kept.changed_at))


def _ending(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
