"""One ordinary project (examples/catalog's CrawlSpider) three ways over the same
changing sample site, run after run: plain Scrapy, with scrapy-deltafetch, and with
this add-on's skipping (``INCRECRAWL_SKIP_NOT_DUE``). Per run: page requests, and the
site's edits each way caught, still waiting (the page is not due yet) or missed (the
page was fetched after the edit and the change not reported).

    pip install -e ".[bench]"
    python benchmarks/embedding.py [--pages 50] [--runs 30] [--edits 0.02]

A run a day (the add-on's clock moves a day each run); before each run after the
first, a share of the pages is edited.

    python benchmarks/embedding.py --shapes [--runs 30] [--edits 0.02]

The two shapes of examples/quotes over the quotes site (100 quotes, ten a page):
Scrapy's tutorial spider (items without a URL, the next page followed) and a
CrawlSpider following every link from the home page, plain and with the add-on's two
lines. Before each run after the first a share of the quotes is edited, and each
week a page of ten quotes is added. Per way: page requests, items delivered against
the true changes (each change once, nothing else), changes never delivered, and how
many days a new page took to be found.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section
from increcrawl_scrapy.testing import SampleSite
from increcrawl_scrapy.testing.quotes import QuotesSite

CATALOG = Path(__file__).resolve().parent.parent / "examples" / "catalog"
QUOTES = CATALOG.parent / "quotes"
DAY = 86_400.0
MODES = ("plain Scrapy", "scrapy-deltafetch", "increcrawl add-on, skipping")


def crawl(mode: str, site: SampleSite, work: Path, run: int, now: float) -> list[dict]:
    (work / "now").write_text(str(now))
    feed = work / f"{mode[:5]}-{run}.jsonl"
    settings = {
        "plain Scrapy": ["ADDONS={}"],
        "scrapy-deltafetch": [
            "ADDONS={}",
            'SPIDER_MIDDLEWARES={"benchmarks.deltafetch_async.AsyncDeltaFetch": 100}',
            "DELTAFETCH_ENABLED=True",
            f"DELTAFETCH_DIR={work / 'deltafetch'}",
        ],
        "increcrawl add-on, skipping": [
            f"INCRECRAWL_DB={work / 'state.sqlite'}",
            "INCRECRAWL_CLOCK=benchclock.now",
        ],
    }[mode]
    command = [sys.executable, "-m", "scrapy", "crawl", "pages", "-a", f"start_url={site.url}/"]
    for setting in [*settings, "TELNETCONSOLE_ENABLED=False", "LOG_LEVEL=WARNING"]:
        command += ["-s", setting]
    command += ["-o", f"{feed}:jsonlines"]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GEONODE_API_KEY", "SCRAPY_SETTINGS_MODULE")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(work), str(CATALOG.parent.parent)])
    done = subprocess.run(
        command, cwd=CATALOG, env=env, capture_output=True, text=True, timeout=600
    )
    if done.returncode:
        raise SystemExit(f"{mode} run {run} failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []


def crawl_quotes(spider: str, addon: bool, site: QuotesSite, work: Path, run: int) -> list[dict]:
    """One run of examples/quotes' *spider*, plain or with the add-on."""
    (work / "now").write_text(str(1_800_000_000 + run * DAY))
    feed = work / f"{spider}-{addon}-{run}.jsonl"
    settings = (
        [f"INCRECRAWL_DB={work / 'state.sqlite'}", "INCRECRAWL_CLOCK=benchclock.now"]
        if addon
        else ["ADDONS={}"]
    )
    command = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"start_url={site.url}/"]
    for setting in [*settings, "TELNETCONSOLE_ENABLED=False", "LOG_LEVEL=WARNING"]:
        command += ["-s", setting]
    command += ["-o", f"{feed}:jsonlines"]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("GEONODE_API_KEY", "SCRAPY_SETTINGS_MODULE")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(work), str(QUOTES.parent.parent)])
    done = subprocess.run(command, cwd=QUOTES, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode:
        raise SystemExit(f"{spider} run {run} failed:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []


def shape(spider: str, addon: bool, runs: int, edits: float) -> dict:
    chance = random.Random(11)  # the same edits for every way
    with tempfile.TemporaryDirectory() as tmp, QuotesSite(quotes=100) as site:
        work = Path(tmp)
        (work / "benchclock.py").write_text(
            f"def now():\n    return float(open({str(work / 'now')!r}).read())\n"
        )
        pending: dict[str, int] = {}  # a changed quote's text -> the run it changed before
        caught = extra = missed = 0
        requests, whole, delays, found_after = [], [], [], []
        added: dict[int, int] = {}  # a page added and not requested yet -> the run
        schedules: list[float | None] = []  # days until the page linking each added one is due
        for run in range(runs):
            if run:
                for i in chance.sample(range(len(site.quotes)), int(len(site.quotes) * edits)):
                    pending.pop(str(site.quotes[i]["text"]), None)  # edited again: superseded
                    text = f"\u201cQuote {i}, as edited before run {run}.\u201d"
                    site.edit(i, text)
                    pending[text] = run
            if run and run % 7 == 0:
                for i in site.add(10):
                    pending[str(site.quotes[i]["text"])] = run
                added[site.pages] = run
                if addon:  # the page that now links it: when it is due, by its schedule
                    schedules.append(_due_in(work, site, site.pages - 1, run))
            site.reset_counters()
            items = crawl_quotes(spider, addon, site, work, run)
            requests.append(sum(site.requested.values()))
            whole.append(requests[-1] - sum(site.not_modified.values()))
            for item in items:
                if not run:
                    continue  # the first run delivers everything: nothing to compare
                if item.get("change", "new") in ("new", "changed") and item["text"] in pending:
                    delays.append(run - pending.pop(item["text"]))
                    caught += 1
                else:
                    extra += 1
            if run == 0:
                pending.clear()
            for text in list(pending):  # its page fetched whole, its change not delivered
                at = next(i for i, quote in enumerate(site.quotes) if quote["text"] == text)
                path = "/" if at < 10 else f"/page/{at // 10 + 1}/"
                if site.requested[path] > site.not_modified[path]:
                    del pending[text]
                    missed += 1
            for page, since in list(added.items()):
                if f"/page/{page}/" in site.requested:
                    found_after.append(run - since)
                    del added[page]
        return {
            "requests": requests,
            "whole": whole,
            "delay": sum(delays) / len(delays) if delays else 0.0,
            "not_found": len(added),
            "caught": caught,
            "extra": extra,
            "missed": missed,
            "waiting": len(pending),
            "found_after": found_after,
            "schedules": schedules,
        }


def _due_in(work: Path, site: QuotesSite, page: int, run: int) -> float | None:
    """Days from *run* until *page* (of the quotes site) is due, by its row's schedule;
    None if the crawl has no row for it (not found itself yet)."""
    url = f"{site.url}/" if page == 1 else site.page_url(page)
    with sqlite3.connect(f"file:{work / 'state.sqlite'}?mode=ro", uri=True) as db:
        row = db.execute("SELECT next_check FROM pages WHERE url = ?", (url,)).fetchone()
    return max(0.0, (row[0] - (1_800_000_000 + run * DAY)) / DAY) if row else None


def shapes(runs: int, edits: float) -> None:
    rows = []
    for spider, label in (("quotes", "tutorial spider"), ("pages", "CrawlSpider")):
        plain = None
        for addon in (False, True):
            result = shape(spider, addon, runs, edits)
            print(spider, addon, result, flush=True)
            later = sum(result["requests"][1:])
            plain = later if plain is None else plain
            days = result["found_after"]
            rows.append(
                [
                    label,
                    "add-on, skipping" if addon else "plain Scrapy",
                    f"{later / (runs - 1):,.1f}",
                    f"{later / plain:.0%}",
                    f"{sum(result['whole'][1:]) / (runs - 1):,.1f}",
                    result["caught"],
                    result["extra"],
                    result["missed"],
                    result["waiting"],
                    f"{result['delay']:.1f}",
                    ", ".join(str(d) for d in days)
                    + (f" ({result['not_found']} not found yet)" if result["not_found"] else ""),
                    ", ".join("not found" if d is None else f"{d:.1f}" for d in result["schedules"])
                    or "-",
                ]
            )
    body = (
        f"examples/quotes' two shapes over the quotes site (100 quotes, ten a page), {runs} "
        f"runs a day apart, {edits:.0%} of the quotes edited before each run after the "
        "first and a page of ten quotes added each week. Requests: every request the site "
        "answered (304s included). True changes: the edits and the new quotes; delivered: "
        "items delivered new or changed that were a true change still pending (each once); "
        "extra: any other item delivered after the first run; missed: the change's page "
        "fetched whole after it and the change not delivered; waiting: its page not due "
        "yet at the last run; new page found: runs after it was added until it was "
        "requested (0: the same run); its listing due in: when the page that links it was due "
        "by its own schedule, at the run the page was added (the target: found no later; not "
        "found: that listing was itself a page added and not found yet).\n\n"
        + table(
            [
                "shape",
                "way",
                "requests a run after the first",
                "vs plain",
                "of which whole (not 304)",
                "changes delivered",
                "extra items",
                "changes missed",
                "waiting at the end",
                "days from change to delivery (mean)",
                "new page found after (days)",
                "its listing due in (days)",
            ],
            rows,
        )
    )
    print(body)
    write_section("Embedding: the tutorial and CrawlSpider shapes", body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=50)  # all on the listing
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--edits", type=float, default=0.02, help="share edited before each run")
    parser.add_argument("--shapes", action="store_true", help="examples/quotes' two shapes")
    args = parser.parse_args()
    if args.shapes:
        shapes(args.runs, args.edits)
        return
    results = {}
    for mode in MODES:
        chance = random.Random(7)  # the same edits for every mode
        with tempfile.TemporaryDirectory() as tmp, SampleSite(pages=args.pages) as site:
            work = Path(tmp)
            (work / "benchclock.py").write_text(
                f"def now():\n    return float(open({str(work / 'now')!r}).read())\n"
            )
            open_edits: dict[str, int] = {}  # page -> run it was edited before
            caught = missed = 0
            requests = []
            for run in range(args.runs):
                if run:
                    for i in chance.sample(range(args.pages), int(args.pages * args.edits)):
                        site.edit(i)
                        open_edits.setdefault(site.page_url(i), run)
                site.reset_counters()
                items = crawl(mode, site, work, run, 1_800_000_000 + run * DAY)
                requests.append(site.counters["pages"])
                fetched = {path for path in site.fetched if site.fetched[path]}
                reported = {item["url"] for item in items}
                if mode.startswith("increcrawl"):
                    reported = {item["url"] for item in items if item.get("change") == "changed"}
                for url in list(open_edits):
                    if url.removeprefix(site.url) in fetched:
                        if url in reported:
                            caught += 1
                        else:
                            missed += 1
                        del open_edits[url]
            results[mode] = {
                "requests": requests,
                "caught": caught,
                "missed": missed,
                "waiting": len(open_edits),
            }
            print(mode, results[mode], flush=True)
    baseline = sum(results["plain Scrapy"]["requests"][1:])
    rows = []
    for mode, result in results.items():
        later = sum(result["requests"][1:])
        rows.append(
            [
                mode,
                result["requests"][0],
                f"{later / (args.runs - 1):,.0f}",
                f"{later / baseline:.0%}",
                result["caught"],
                result["waiting"],
                result["missed"],
            ]
        )
    edits = int(args.pages * args.edits) * (args.runs - 1)
    body = (
        f"examples/catalog's CrawlSpider over a sample site of {args.pages:,} pages, "
        f"{args.runs} runs a day apart, {args.edits:.0%} of the pages edited before each run "
        f"after the first ({edits} edits, the same for each way). Page requests exclude the "
        "listing. Caught: the page was fetched after its edit and the change reported; "
        "waiting: not fetched since its edit (with the add-on: not due yet); missed: fetched "
        "after its edit and the change not reported.\n\n"
        + table(
            [
                "way",
                "requests, run 1",
                "requests a run after",
                "vs plain",
                "caught",
                "waiting",
                "missed",
            ],
            rows,
        )
    )
    print(body)
    write_section("Embedding: skipping what is not due", body)


if __name__ == "__main__":
    main()
