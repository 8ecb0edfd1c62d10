"""``scrapy increcrawl report -o report.html``: the crawl's history in one
self-contained HTML file (styles, script and data inline: it opens with no network).

The page's script draws the charts from the data island it carries, so the file
stays small whatever the number of runs, and a browser test can see them render.
"""

from __future__ import annotations

import argparse
import json
import os
from importlib import resources
from typing import Any

from scrapy.settings import BaseSettings

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.commands.opening import config_of, exists, now, read_only
from increcrawl_scrapy.commands.pages import stored_key
from increcrawl_scrapy.commands.report_changes import changes
from increcrawl_scrapy.commands.state import UNREACHED_SHOWN
from increcrawl_scrapy.crawl import hidden
from increcrawl_scrapy.crawl.run_summary import counted
from increcrawl_scrapy.state import SCHEMA_VERSION, StateReader, driver_errors, is_postgres, shown

HOUR, DAY = 3_600.0, 86_400.0
#: The interval histogram's buckets: (label, upper bound in seconds).
INTERVAL_BUCKETS = (
    ("≤ 1 h", HOUR),
    ("≤ 6 h", 6 * HOUR),
    ("≤ 1 d", DAY),
    ("≤ 7 d", 7 * DAY),
    ("≤ 30 d", 30 * DAY),
    ("≤ 180 d", 180 * DAY),
    ("> 180 d", float("inf")),
)
RUNS_SHOWN = 200  # the latest runs of each seed
CHANGING_SHOWN = 20
_PLACEHOLDER = "__REPORT_DATA__"


def write(settings: BaseSettings, opts: argparse.Namespace, url: str | None = None) -> int:
    """The report; with *url*, that page's history too, first, whatever it did."""
    config = config_of(settings)
    if config is None:
        return close_reasons.BAD_INPUT
    if not opts.output:
        print("scrapy increcrawl report needs -o FILE (the HTML file to write)")
        return close_reasons.BAD_INPUT
    if not exists(config):
        return 1
    try:
        reader = read_only(config)
        behind = _schema_behind(reader)
        page = reader.page(stored_key(reader, config, url)) if url and behind is None else None
        if url and behind is None and page is None:
            print(f"No page {url} in {shown(config.db_path)}")
            return 1
        plan = {"reset_day": config.tokens_reset_day, "budget": config.monthly_tokens}
        data = (
            gather(reader, now(config), seed=opts.seed, page=page, **plan) if behind is None else {}
        )
    except driver_errors() as exc:
        print(f"Cannot read {shown(config.db_path)}: {exc}")
        return 1
    except ValueError as exc:
        print(f"Not a page URL: {url} ({exc})")
        return close_reasons.BAD_INPUT
    if behind is not None:
        print(f"{shown(config.db_path)} {behind}")
        return 1
    if opts.seed and not data["seeds"]:
        print(f"No pages of seed {opts.seed!r} in {shown(config.db_path)}")
        return 1
    data["database"] = (
        shown(config.db_path) if is_postgres(config.db_path) else os.path.abspath(config.db_path)
    )
    try:
        with open(opts.output, "w", encoding="utf-8") as out:
            out.write(render(data))
    except OSError as exc:
        print(f"Cannot write {opts.output}: {exc}")
        return 1
    runs = sum(len(seed["runs"]) for seed in data["seeds"])
    print(f"Wrote {opts.output}: {counted(len(data['seeds']), 'seed')}, {counted(runs, 'run')}")
    return 0


def _schema_behind(reader: StateReader) -> str | None:
    """Why a SQLite state is too old for the report (no crawl of this package has
    opened it yet: its runs' history is not there), or None. (A PostgreSQL state
    of another version is refused when opened.)"""
    found = reader.schema_behind()
    if found is None:
        return None
    return (
        f"has schema version {found}, the report reads {SCHEMA_VERSION}: a crawl with "
        "this package brings it up to date"
    )


_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def render(data: dict[str, Any]) -> str:
    template = resources.files("increcrawl_scrapy").joinpath("templates/report.html")
    # Inside <script>, page text must not read as markup: "</script>" ends the
    # element, "<!--<script>" starts the double-escaped state (the island's own end
    # tag then no longer ends it). JSON's \u escapes keep "<", ">" and "&" out of it.
    island = json.dumps(data, ensure_ascii=False).translate(_SCRIPT_SAFE)
    return template.read_text(encoding="utf-8").replace(_PLACEHOLDER, island)


def gather(
    reader: StateReader,
    at: float,
    seed: str | None = None,
    page: tuple[int, str] | None = None,
    reset_day: int = 1,
    budget: int = 0,
) -> dict[str, Any]:
    """The report's data; *page*: the (id, seed) of a page whose history is shown."""
    seeds = reader.seeds()
    if seed:
        seeds = [name for name in seeds if name == seed]
    shown_pages = {page[1]: [page[0]]} if page else {}
    tokens = reader.token_figures(at, reset_day, budget)  # the plan's: every seed's runs
    return {
        "generated_at": at,
        "tokens": {**tokens.as_dict(), "line": tokens.line()},
        "seeds": [_seed(reader, name, at, shown_pages.get(name, [])) for name in seeds],
    }


def _seed(reader: StateReader, seed: str, at: float, asked: list[int]) -> dict[str, Any]:
    counts = reader.report_counts(seed, at)
    runs = reader.report_runs(seed, RUNS_SHOWN)
    for run in runs:  # responses by kind (state/history.py); none before schema 9
        run["statuses"] = json.loads(run["statuses"]) if run["statuses"] else None
        # What the rules took out of comparison, and what of it is over the line.
        run["hidden"] = hidden.warnings(hidden.loads(run["hidden"]))
    fetched = sum(run["fetched"] for run in runs if run["listed"])
    listed = sum(run["listed"] for run in runs if run["listed"])
    changing = reader.changing_pages(seed, CHANGING_SHOWN)
    return {
        "seed": seed,
        **counts,
        "saved": f"{listed / fetched:,.1f}x" if fetched else "-",
        "runs": runs,
        "intervals": _intervals(reader, seed),
        "changing": changing,
        **changes(reader, [run["id"] for run in runs], [page["id"] for page in changing], asked),
        "verdicts": reader.report_verdicts(seed),
        # Pages with state the last run did not reach (a link-crawled site's deleted
        # pages among them, until checked directly: pages/unreached.py).
        "unreached": reader.unreached(seed, runs[-1]["started_at"], UNREACHED_SHOWN)
        if runs
        else [],
    }


def _intervals(reader: StateReader, seed: str) -> list[dict[str, Any]]:
    tally = [0] * len(INTERVAL_BUCKETS)
    for interval in reader.fetched_intervals(seed):
        tally[next(i for i, (_, bound) in enumerate(INTERVAL_BUCKETS) if interval <= bound)] += 1
    return [
        {"label": label, "pages": pages}
        for (label, _), pages in zip(INTERVAL_BUCKETS, tally, strict=True)
    ]
