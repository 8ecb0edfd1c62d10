"""The block a run ends with: what it found, fetched and saved, and why it ended."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from increcrawl_scrapy import close_reasons, stats
from increcrawl_scrapy.schedule.token_plan import TokenFigures


def run_summary(
    value: Callable[..., Any],
    *,
    seed: str,
    listed: int,
    reason: str,
    verdicts: Sequence[Mapping[str, Any]] = (),
    embedded: bool = False,
    warnings: Sequence[str] = (),
    tokens: TokenFigures | None = None,
) -> str:
    """*value* reads the crawl's stats (``StatsCollector.get_value``); *listed* is
    the seed's live pages, what fetching every listed page would have cost;
    *verdicts* are the seed's hosts' rows (``StateStore.lastmod_verdicts``);
    *embedded*: a spider of the project's own (the add-on), not ``incremental``;
    *warnings*: the lines of the warnings the crawl logged (``run_warnings.py``);
    *tokens*: the state's tokens this week and month (``token_plan.py``)."""

    def count(key: str) -> int:
        return int(value(key, 0) or 0)

    changes = {label: count(key) for label, key in stats.BY_CHANGE.items()}
    errors = count(stats.ERRORS)
    fetched = sum(changes.values()) + errors
    code = close_reasons.exit_code([reason])
    fetches = (
        # A project's own spider: its pages, and its items on the line after.
        (f"{counted(fetched, 'page')} fetched: " if embedded else f"{fetched:,} fetched: ")
        + ", ".join(f"{n:,} {label}" for label, n in changes.items())
        + f", {counted(errors, 'error')}"
    )
    queue = (  # a project's own spider has no discovery and no queue
        ""
        if embedded
        else f"discovered {counted(count(stats.DISCOVERED), 'URL')}{_unchanged(count)}; "
        f"{counted(count(stats.DUE), 'page')} due, "
    )
    lines = [
        f"Run summary for {seed}: ended {reason} (exit code {code} from scrapy crawl)",
        f"  {queue}{fetches}",
    ]
    if embedded:  # what the feeds got, by their labels
        delivered = {label: count(stats.ITEMS_DELIVERED.format(change=label)) for label in changes}
        lines.append(
            "  items delivered: "
            + ", ".join(f"{delivered[label]:,} {label}" for label in ("new", "changed", "gone"))
            + (f", {delivered['unchanged']:,} unchanged" if delivered["unchanged"] else "")
        )
    waiting = {
        "INCRECRAWL_MAX_FETCHES": count(stats.BUDGET_LEFT),
        "INCRECRAWL_MAX_TOKENS": count(stats.TOKENS_LEFT),
        "INCRECRAWL_MONTHLY_TOKENS": count(stats.MONTH_LEFT),
    }
    if any(waiting.values()):
        lines.append(
            "  left due for a later run: "
            + ", ".join(f"{n:,} by {name}" for name, n in waiting.items() if n)
        )
    if count(stats.API_REQUESTS):
        lines.append(
            f"  Geonode: {counted(count(stats.API_REQUESTS), 'request')}, "
            f"{counted(count(stats.API_TOKENS), 'token')} charged"
        )
    if count(stats.HYBRID_PROBES):  # hybrid: what the free probes saved
        lines.append(
            f"  hybrid: {counted(count(stats.HYBRID_PROBES), 'direct probe')} (free), "
            f"{count(stats.HYBRID_SAVED):,} of them answered the check without a token"
        )
    if tokens is not None and (tokens.week or tokens.month or tokens.budget):
        lines.append(f"  {tokens.line()}")
    if embedded:
        lines.extend(_embedded(count, fetched, listed))
    elif listed:
        lines.append(f"  {saved(fetched, listed)}")
    for host in verdicts:
        lines.append(
            f"  Sitemap dates of {host['host']}: {host['verdict']} (moved and changed "
            f"{host['moved_changed']:.0f}, moved for nothing {host['moved_unchanged']:.0f}, "
            f"changed without a move {host['unmoved_changed']:.0f}; {host['waves']} waves and "
            f"{host['future_dates']} future dates seen so far)"
        )
    if warnings:
        lines.append("  logged (see above for each):")
        lines.extend(f"  {line}" for line in warnings)
    return "\n".join(lines)


def _embedded(count: Callable[[str], int], fetched: int, listed: int) -> list[str]:
    """A project's own spider: what skipping did, and whether the crawl reached every
    page it knows (else no claim of requests saved)."""
    not_due = count(stats.SKIPPED.format(reason="not_due"))
    lines = []
    not_modified = count(stats.SKIPPED.format(reason="not_modified"))
    if not_due or not_modified or count(stats.REPLAYED) or count(stats.ITEMS_UNCHANGED):
        moved = count(stats.ITEMS_MOVED)
        lines.append(
            f"  skipped {counted(not_due, 'page')} not due and "
            f"{not_modified:,} not modified (304), "
            f"replayed {counted(count(stats.REPLAYED), 'request')} they led to"
            + _replayed_pages(count)
            + "; "
            f"{counted(count(stats.ITEMS_UNCHANGED), 'unchanged item')} not delivered"
            + (f" ({moved:,} of them moved from another page)" if moved else "")
        )
    held_over = count(stats.ITEMS_HELD_OVER)
    if held_over:  # pages/pending.py
        lines.append(
            f"  {counted(held_over, 'new or gone item')} held for a later run: the crawl "
            "closed before it saw every page, where they may have moved from or to"
        )
    if not listed:
        return lines
    # A page skipped for an old replayed request only: nothing of the run showed it.
    shown = max(0, not_due - count(stats.UNREACHED_REPLAYED))
    reached = min(fetched + shown, listed)
    if reached < listed:
        lines.append(
            f"  reached {reached:,} of the {counted(listed, 'page')} with state "
            f"({fetched:,} fetched, {shown:,} skipped{_by_replays(count)}): "
            f"{listed - reached:,} not reached by this run (no response led to them; "
            "checked directly once INCRECRAWL_UNREACHED_RUNS runs have not fetched them)"
        )
    else:
        lines.append(f"  {saved(fetched, listed, listing=False)}{_by_replays(count, True)}")
    return lines


def _by_replays(count: Callable[[str], int], alone: bool = False) -> str:
    """The pages skipped that only replays of pages fetched within 5 days reached
    (``pages/listings.py``): reached, counted apart from those a response reached."""
    recent = count(stats.UNREACHED_RECENT)
    if not recent:
        return ""
    if alone:
        return f"; {counted(recent, 'page')} skipped reached by recent replays only"
    return f", {recent:,} of them by recent replays only"


def _replayed_pages(count: Callable[[str], int]) -> str:
    """The pages the replayed requests lead to: every skipped page replays all its
    links, most of them to pages another replay or response asked already."""
    pages = count(stats.REPLAYED_PAGES)
    if not pages or pages == count(stats.REPLAYED):
        return ""
    return f" (to {counted(pages, 'page')}: Scrapy's duplicate filter drops the repeats)"


def _unchanged(count: Callable[[str], int]) -> str:
    # Unchanged sitemaps are not read again: their URLs are not counted as discovered.
    unchanged = count(stats.SITEMAP_UNCHANGED)
    their = "its" if unchanged == 1 else "their"
    return (
        f" ({counted(unchanged, 'sitemap')} unchanged since {their} last read)" if unchanged else ""
    )


def counted(n: int, noun: str) -> str:
    """*n* of *noun*, in the singular for one (``1 page``, ``2 pages``)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def saved(fetched: int, listed: int, listing: bool = True) -> str:
    """A run's fetches against fetching every listed page; without a *listing* (a
    project's own spider: no sitemap), against every page with state."""
    if fetched > listed:  # pages that left the sitemap, checked to be sure they are gone
        if not listing:
            return f"fetched {fetched:,} pages, more than the {listed:,} with state"
        return (
            f"fetched {fetched:,} pages, more than the {listed:,} listed "
            "(pages no longer listed checked too)"
        )
    if not fetched:
        fewer = "none at all"
    elif fetched == listed:
        fewer = "as many as fetching them all"
    else:
        fewer = f"{listed / fetched:,.1f}x fewer than fetching them all"
    known = counted(listed, "listed page") if listing else f"{counted(listed, 'page')} with state"
    return f"fetched {fetched:,} of {known} ({fewer})"
