"""One ordinary project (examples/catalog's CrawlSpider) three ways over the same
changing sample site, run after run: plain Scrapy, with scrapy-deltafetch, and with
this add-on's skipping (``INCRECRAWL_SKIP_NOT_DUE``). Per run: page requests, and the
site's edits each way caught, still waiting (the page is not due yet) or missed (the
page was fetched after the edit and the change not reported).

    pip install -e ".[bench]"
    python benchmarks/embedding.py [--pages 50] [--runs 30] [--edits 0.02]

A run a day (the add-on's clock moves a day each run); before each run after the
first, a share of the pages is edited.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section
from increcrawl_scrapy.testing import SampleSite

CATALOG = Path(__file__).resolve().parent.parent / "examples" / "catalog"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=50)  # all on the listing
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--edits", type=float, default=0.02, help="share edited before each run")
    args = parser.parse_args()
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
