"""What the revisit simulator's fetches cost in Geonode tokens, by fetcher, and a
monthly plan budget spread over the runs.

    python benchmarks/simulate_tokens.py [--pages 50000] [--weeks 12] [--seeds 7,8,9]
                                         [--monthly TOKENS] [--quick] [--no-write]

The learned policy on ``simulate.py``'s site (the same events, seeds and real
StateStore), each fetch then charged as a fetcher charges it:

- ``direct``: Scrapy's own requests, free;
- ``geonode``: an extraction per fetch, one token (as documented for a plain extract);
- ``hybrid``: a free conditional probe first, an extraction only when the page
  changed since the last extraction (its validators or its direct fingerprint moved;
  a page's first fetch has nothing to compare with), when its host blocks direct
  fetching (every fetch), and now and then to compare both answers (one probe in
  ``--compare-every`` per host). A gone page answers its probe with a 404: free.

The site's pages are spread over ``HOSTS`` hosts; the ``blocked`` scenario is the
honest one with half of them blocking direct requests (sitemaps are read all the
same). Which fetcher answers does not change what is due (both see the same text), so
each scenario is simulated once and charged by each fetcher.

The ``monthly budget`` row: ``INCRECRAWL_MONTHLY_TOKENS`` through the Geonode fetcher,
runs at irregular intervals, each run's share from ``token_plan.py`` (the code the
crawl runs) read from the runs the store recorded, the due pages likeliest to have
changed first; every plan month is checked against the budget.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import simulate as site_model
from benchmarks.common import table, write_section
from benchmarks.simulate import (
    HOUR,
    POLICIES,
    START,
    TAIL_WEEKS,
    WEEK,
    Site,
    make_events,
    measure,
)
from increcrawl_scrapy.schedule.token_plan import period
from increcrawl_scrapy.state import StateStore

HOSTS = 10
BLOCKED = frozenset(range(HOSTS // 2))  # the hosts of the blocked scenario
COMPARE_EVERY = 100  # unchanged probes per host between two comparing extractions
RESET_DAY = 1
#: The plan starts once the first crawl of the site is done (its pages appear over
#: the first week): no monthly plan pays for fetching 50,000 new pages at once.
PLAN_WEEKS = 2
MODES = ("honest", "mixed", "deploy", "never")
COLUMNS = [
    "scenario",
    "page requests/week",
    "tokens/week",
    "changes caught/week",
    "tokens per caught change",
    "caught %",
]


def host_of(page: int) -> int:
    return page % HOSTS


def charged(
    fetches: list[tuple[float, int, int]],
    fetcher: str,
    blocked: frozenset[int] = frozenset(),
    compare_every: int = COMPARE_EVERY,
) -> list[tuple[float, int]]:
    """(when, tokens) of each fetch ``(when, page, version seen; -1 gone)`` by *fetcher*."""
    extracted: dict[int, int] = {}  # page -> the version its last extraction saw
    probes: dict[int, int] = {}  # host -> unchanged probes since its last comparison
    out = []
    for when, page, version in fetches:
        host = host_of(page)
        if fetcher == "direct":
            cost = 0
        elif fetcher == "geonode" or host in blocked:
            cost = 1
        elif version == -1:
            cost = 0  # the probe's 404 says it
        elif extracted.get(page) != version:
            cost = 1  # changed, or never extracted: nothing to compare a probe with
        else:
            probes[host] = probes.get(host, 0) + 1
            cost = 1 if probes[host] % compare_every == 0 else 0
        if cost and version != -1:
            extracted[page] = version
        out.append((when, cost))
    return out


@dataclass(frozen=True)
class Job:
    mode: str
    seed: int
    pages: int
    weeks: int
    monthly: int = 0  # a plan's tokens a month: the monthly budget job


#: The default site's pages added and deleted a week, per page (100 and 50 of
#: 50,000): a smaller site keeps its shape (new pages each cost an extraction).
ADDED_SHARE = site_model.ADDED_PER_WEEK / 50_000
DELETED_SHARE = site_model.DELETED_PER_WEEK / 50_000


def simulate(job: Job) -> dict[str, Any]:
    _, factory, params = POLICIES["learned"]
    # In the worker process: make_events reads them.
    site_model.ADDED_PER_WEEK = round(job.pages * ADDED_SHARE)
    site_model.DELETED_PER_WEEK = round(job.pages * DELETED_SHARE)
    weeks = job.weeks + TAIL_WEEKS
    rates, volatile, events = make_events(job.pages, weeks, job.seed)
    site = Site(job.pages, volatile, events, job.mode)
    end = START + weeks * WEEK
    budget = None
    if job.monthly:
        rng = random.Random(job.seed)
        # A cron job that is late or early: gaps from 15 minutes to 1 h 45, 1 h on average.
        runs, at = [], START
        while at < end:
            runs.append(at)
            at += rng.uniform(0.25, 1.75) * HOUR

        def budget(store: StateStore, now: float) -> int | None:
            if now < START + PLAN_WEEKS * WEEK:
                return None
            return store.month_share(now, RESET_DAY, job.monthly).share

    else:
        runs = [START + k * HOUR for k in range(int(weeks * WEEK / HOUR))]
    scratch = "/dev/shm" if Path("/dev/shm").is_dir() else None
    with tempfile.TemporaryDirectory(dir=scratch) as workdir:
        recorder, _ = factory(*params)(site, iter(runs), workdir, budget)
    until = START + job.weeks * WEEK
    since = until - 4 * WEEK
    figures = measure(site, recorder, rates, since, until)
    result: dict[str, Any] = {"job": job, "figures": figures}
    fetches = recorder.fetches
    for name, fetcher, blocked in (
        ("direct", "direct", frozenset()),
        ("geonode", "geonode", frozenset()),
        ("hybrid", "hybrid", frozenset()),
        ("hybrid-blocked", "hybrid", BLOCKED),
    ):
        costs = charged(fetches, fetcher, blocked)
        result[name] = sum(cost for when, cost in costs if since <= when < until) / 4
    if job.monthly:
        result["months"] = months(recorder.spent, START + PLAN_WEEKS * WEEK, end)
    return result


def months(spent: list[tuple[float, int]], start: float, end: float) -> list[dict]:
    """Each plan month the runs touched: its tokens, and whether it was whole."""
    by_month: dict[float, int] = {}
    for when, tokens in spent:
        first, _ = period(when, RESET_DAY)
        by_month[first] = by_month.get(first, 0) + tokens
    out = []
    for first, tokens in sorted(by_month.items()):
        last = period(first, RESET_DAY)[1]
        out.append({"start": first, "tokens": tokens, "whole": start <= first and last <= end})
    return out


def row(label: str, results: list[dict], fetcher: str) -> list[str]:
    figures = [r["figures"] for r in results]
    requests = statistics.mean(f["requests_per_week"] for f in figures)
    caught = statistics.mean(f["detected"] * f["changes_per_week"] for f in figures)
    share = statistics.mean(f["detected"] for f in figures)
    tokens = statistics.mean(r[fetcher] for r in results)
    return [
        label,
        f"{requests:,.0f}",
        f"{tokens:,.0f}",
        f"{caught:,.0f}",
        f"{tokens / caught:.2f}" if caught else "-",
        f"{share:.1%}",
    ]


def monthly_row(results: list[dict], budget: int) -> tuple[list[str], bool]:
    whole = [m for r in results for m in r["months"] if m["whole"]]
    every = [m for r in results for m in r["months"]]
    spent = statistics.mean(m["tokens"] for m in whole)
    deviation = (spent - budget) / budget
    worst = max(abs(m["tokens"] - budget) / budget for m in whole)
    most = max(m["tokens"] for m in every)
    ok = worst <= 0.02 and most <= budget
    return [
        "monthly budget",
        f"budget {budget:,} tokens a month",
        f"spent {spent:,.1f} a whole month (mean of {len(whole)} months)",
        f"deviation {deviation:+.2%} (worst month {worst:.2%})",
        f"most in any month {most:,} ({'never over' if most <= budget else '**over**'})",
        f"{statistics.mean(r['figures']['detected'] for r in results):.1%}",
    ], ok


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--weeks", type=int, default=12)
    parser.add_argument("--seeds", default="7,8,9")
    parser.add_argument(
        "--monthly", type=int, default=0, help="the plan's tokens a month (default: pages x 8%%)"
    )
    parser.add_argument("--quick", action="store_true", help="10,000 pages, 8 weeks")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print, leave RESULTS.md")
    args = parser.parse_args()
    if args.quick:
        args.pages, args.weeks = 10_000, 8
    monthly = args.monthly or round(args.pages * 0.08)
    seeds = [int(seed) for seed in args.seeds.split(",")]
    jobs = [Job(mode, seed, args.pages, args.weeks) for mode in MODES for seed in seeds]
    jobs += [Job("honest", seed, args.pages, args.weeks, monthly) for seed in seeds]
    jobs.sort(key=lambda j: -MODES.index(j.mode))  # the slowest first
    started = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as pool:
        done = dict(zip(jobs, pool.map(simulate, jobs), strict=True))
    minutes = (time.monotonic() - started) / 60

    def of(mode: str, plan: bool = False) -> list[dict]:
        found = [r for j, r in done.items() if j.mode == mode and bool(j.monthly) == plan]
        return sorted(found, key=lambda r: r["job"].seed)

    rows = [row(mode, of(mode), "hybrid") for mode in MODES]
    rows.append(row("blocked", of("honest"), "hybrid-blocked"))
    budget_row, budget_ok = monthly_row(of("honest", plan=True), monthly)
    rows.append(budget_row)
    baseline = [row(mode, of(mode), "geonode") for mode in MODES]
    honest, blocked = rows[0], rows[4]
    targets = [
        ["honest: ≤ 1.15 tokens per caught change at ≥ 99%", f"{honest[4]} at {honest[5]}",
         _met(float(honest[4]) <= 1.15 and float(honest[5][:-1]) >= 99)],
        ["blocked: ≤ 1.5 at ≥ 97%", f"{blocked[4]} at {blocked[5]}",
         _met(float(blocked[4]) <= 1.5 and float(blocked[5][:-1]) >= 97)],
        ["monthly budget: within ±2%, never over", budget_row[3], _met(budget_ok)],
    ]  # fmt: skip
    body = (
        f"{args.pages:,} pages on {HOSTS} hosts ({round(args.pages * ADDED_SHARE):,} added and "
        f"{round(args.pages * DELETED_SHARE):,} deleted a week), {args.weeks} weeks, a run every "
        "hour, the learned policy "
        f"(real StateStore), mean of seeds {', '.join(map(str, seeds))}; figures for the "
        f"last four weeks; {minutes:.1f} minutes on {args.jobs} processes. The hybrid "
        f"fetcher: a free conditional probe, an extraction (one token) when the page "
        f"changed since its last extraction or was never extracted, one comparing "
        f"extraction every {COMPARE_EVERY} unchanged probes a host; `blocked`: the honest "
        f"site with {len(BLOCKED)} of its {HOSTS} hosts refusing direct requests (each "
        "fetch there an extraction). `monthly budget`: INCRECRAWL_MONTHLY_TOKENS = "
        f"{monthly:,} through the Geonode fetcher (a token a fetch), honest dates, runs "
        f"15 min to 1 h 45 apart, from week {PLAN_WEEKS + 1} (after the first crawl), reset "
        "day 1; the whole plan months of each seed.\n\n"
        # The table first: the section's first table is the one it names.
        "### The hybrid fetcher\n\n"
        + table(COLUMNS, rows)
        + "\n\n### Every fetch through Geonode (the baseline, same runs)\n\n"
        + table(COLUMNS, baseline)
        + "\n\n### Targets\n\n"
        + table(["target", "measured", ""], targets)
    )
    if args.no_write:
        print(body)
    else:
        write_section("Tokens", body)


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


if __name__ == "__main__":
    main()
