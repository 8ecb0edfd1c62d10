"""The block a run ends with: what it found, fetched and saved, and why it ended."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from increcrawl_scrapy import close_reasons, stats


def run_summary(
    value: Callable[..., Any],
    *,
    seed: str,
    listed: int,
    reason: str,
    verdicts: Sequence[Mapping[str, Any]] = (),
) -> str:
    """*value* reads the crawl's stats (``StatsCollector.get_value``); *listed* is
    the seed's live pages, what fetching every listed page would have cost;
    *verdicts* are the seed's hosts' rows (``StateStore.lastmod_verdicts``)."""

    def count(key: str) -> int:
        return int(value(key, 0) or 0)

    changes = {label: count(key) for label, key in stats.BY_CHANGE.items()}
    errors = count(stats.ERRORS)
    fetched = sum(changes.values()) + errors
    code = close_reasons.exit_code([reason])
    lines = [
        f"Run summary for {seed}: ended {reason} (exit code {code} from scrapy crawl)",
        f"  discovered {count(stats.DISCOVERED):,} URLs; {count(stats.DUE):,} pages due, "
        f"{fetched:,} fetched: "
        + ", ".join(f"{n:,} {label}" for label, n in changes.items())
        + f", {errors:,} errors",
    ]
    waiting = {
        "INCRECRAWL_MAX_FETCHES": count(stats.BUDGET_LEFT),
        "INCRECRAWL_MAX_TOKENS": count(stats.TOKENS_LEFT),
    }
    if any(waiting.values()):
        lines.append(
            "  left due for a later run: "
            + ", ".join(f"{n:,} by {name}" for name, n in waiting.items() if n)
        )
    if count(stats.API_REQUESTS):
        lines.append(
            f"  Geonode: {count(stats.API_REQUESTS):,} requests, "
            f"{count(stats.API_TOKENS):,} tokens charged"
        )
    if listed:
        saved = f"{listed / fetched:,.1f}x fewer" if fetched else "none"
        lines.append(
            f"  {fetched:,} fetches for {listed:,} listed pages "
            f"(fetching every listed page: {listed:,}; {saved})"
        )
    for host in verdicts:
        lines.append(
            f"  Sitemap dates of {host['host']}: {host['verdict']} (moved and changed "
            f"{host['moved_changed']:.0f}, moved for nothing {host['moved_unchanged']:.0f}, "
            f"changed without a move {host['unmoved_changed']:.0f}; {host['waves']} waves and "
            f"{host['future_dates']} future dates seen so far)"
        )
    return "\n".join(lines)
