"""``scrapy increcrawl status | due | forget``: the state database without SQL.

``status`` opens the database read-only; ``due`` and ``forget`` take the crawl lock,
so they never change a database under a running crawl (exit code 75: try later). A
PostgreSQL state has no such lock (several crawls share it): there they apply at
once, under running crawls, which see them at their next claim. Either way a URL is
keyed by the normalization settings stored with the state, never the shell's: an
edit never re-keys (nor re-fingerprints) the state.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.commands.opening import config_of, exists, now, read_only
from increcrawl_scrapy.crawl import hidden
from increcrawl_scrapy.crawl.run_summary import counted, saved
from increcrawl_scrapy.schedule.token_plan import TokenFigures
from increcrawl_scrapy.state import (
    StateError,
    StateLockedError,
    StateReader,
    StateStore,
    driver_errors,
    shown,
)

DAY = 86_400.0


#: Pages the last run did not reach, named by ``status`` at most.
UNREACHED_SHOWN = 20


def edit(action: str, settings: BaseSettings, opts: argparse.Namespace, url: str | None) -> int:
    """``due`` and ``forget``: one URL, ``--seed SEED`` or (``due`` only) ``--all``."""
    config = config_of(settings)
    if config is None:
        return close_reasons.BAD_INPUT
    chosen = [bool(url), bool(opts.seed), bool(opts.all)]
    if sum(chosen) != 1 or (action == "forget" and opts.all):
        what = "URL or --seed SEED" + (" or --all" if action == "due" else "")
        print(f"scrapy increcrawl {action} needs one {what}")
        return close_reasons.BAD_INPUT
    if not exists(config):
        return 1
    try:
        with StateStore.from_config(config, exclusive=True, keys_as_stored=True) as store:
            if opts.seed and not store.count(opts.seed):
                print(f"No pages of seed {opts.seed!r} in {shown(config.db_path)}")
                return 1
            if action == "due":
                changed = store.make_due(url=url, seed=opts.seed)
            else:
                changed = store.forget(url=url, seed=opts.seed)
    except StateLockedError as exc:
        print(f"Try later: {exc}")
        return close_reasons.DATABASE_IN_USE
    except (StateError, ValueError) as exc:
        print(str(exc))
        return 1
    if url and not changed:
        print(f"No page {url} in {shown(config.db_path)}")
        return 1
    done = "made due now" if action == "due" else "forgotten"
    print(f"{changed} page{'s' if changed != 1 else ''} {done}")
    return 0


def status(settings: BaseSettings, opts: argparse.Namespace) -> int:
    """Per seed: pages, live, gone, missing, due now and within 24 h, the median
    interval, the lastmod verdicts; and the last runs."""
    config = config_of(settings)
    if config is None:
        return close_reasons.BAD_INPUT
    if not exists(config):
        return 1
    try:
        report = _status(
            read_only(config), now(config), config.tokens_reset_day, config.monthly_tokens
        )
    except driver_errors() as exc:
        print(f"Cannot read {shown(config.db_path)}: {exc}")
        return 1
    if opts.seed:
        report["seeds"] = [s for s in report["seeds"] if s["seed"] == opts.seed]
        if not report["seeds"]:
            print(f"No pages of seed {opts.seed!r} in {shown(config.db_path)}")
            return 1
    if opts.json:
        print(json.dumps(report, indent=2))
    else:
        print(_text(report))
    return 0


def _status(reader: StateReader, now: float, reset_day: int = 1, budget: int = 0) -> dict[str, Any]:
    """The status of every seed."""
    seeds = []
    for seed in reader.seeds():
        counts = reader.status_counts(seed, now, now + DAY)
        intervals = reader.fetched_intervals(seed)
        runs = reader.status_runs(seed)
        for run in runs:  # the pages each run's rules took out of comparison
            run["hidden"] = hidden.loads(run["hidden"])
        seeds.append(
            {
                "seed": seed,
                **{key: int(value or 0) for key, value in counts.items()},
                "median_interval_days": round(statistics.median(intervals) / DAY, 2)
                if intervals
                else None,
                "lastmod_verdicts": reader.status_verdicts(seed),
                "runs": runs,
                # Due when its last run started, and fetched by none since.
                "unreached": reader.unreached(seed, runs[0]["started_at"], UNREACHED_SHOWN)
                if runs
                else [],
            }
        )
    tokens = reader.token_figures(now, reset_day, budget)  # the plan's: every seed's runs
    return {"seeds": seeds, "tokens": tokens.as_dict()}


def _text(report: dict[str, Any]) -> str:
    lines = []
    for seed in report["seeds"]:
        median = seed["median_interval_days"]
        lines += [
            f"{seed['seed']}",
            f"  pages {seed['pages']:,}: live {seed['live']:,}, gone {seed['gone']:,}, "
            f"missing {seed['missing']:,}",
            f"  due now {seed['due_now']:,}, within 24 h {seed['due_24h']:,}; median interval "
            + (f"{median:g} day{'' if median == 1 else 's'}" if median is not None else "-"),
        ]
        for host, verdict in seed["lastmod_verdicts"].items():
            lines.append(f"  sitemap dates of {host}: {verdict}")
        unreached = seed.get("unreached") or []
        if unreached:
            more = " (the first ones)" if len(unreached) == UNREACHED_SHOWN else ""
            lines.append(f"  due and not reached by the last run{more}:")
            lines.extend(f"    {url}" for url in unreached)
        for run in seed["runs"]:
            started = time.strftime("%Y-%m-%d %H:%M", time.gmtime(run["started_at"]))
            took = (
                f"{run['finished_at'] - run['started_at']:.0f} s"
                if run["finished_at"]
                else "unfinished"
            )
            complete = {1: "complete", 0: "incomplete"}.get(run["discovery_complete"], "-")
            lines.append(
                f"  run {run['id']} {started} UTC, {took}, {run['close_reason'] or '-'}: "
                f"due {run['due']}, new {run['new']}, changed {run['changed']}, "
                f"gone {run['gone']}, errors {run['errors']}, "
                f"API {counted(run['api_requests'], 'request')} / "
                f"{counted(run['tokens_charged'], 'token')}, discovery {complete}"
            )
            if run["listed"]:  # a project's own spider (no discovery) lists nothing
                listing = run["discovery_complete"] is not None
                lines.append(f"    {saved(run['fetched'], run['listed'], listing)}")
            warned = hidden.warnings(run.get("hidden") or {})
            lines.extend(f"    warning: {line}" for line in warned)
    if not lines:
        return "No pages yet"
    tokens = report["tokens"]
    if tokens["week"] or tokens["month"] or tokens["budget"]:
        lines.append(TokenFigures(**{**tokens, "budget": tokens["budget"] or 0}).line())
    return "\n".join(lines)
