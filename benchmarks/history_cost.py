"""What keeping each run's checks costs (``state/history.py``, for the report).

    python benchmarks/history_cost.py [--pages 50000] [--runs 6] [--keep 3]

A SQLite state of PAGES pages, RUNS runs a day apart, every page fetched every run
(the worst case: a check per page per run), recorded through ``StateStore.record``
and written in its batches; the same with ``INCRECRAWL_HISTORY_RUNS = 0`` (no checks
kept) as the baseline, in the same run. Printed: results per CPU second (the machine
may be shared), the file's size, the checks kept (bounded by KEEP runs), and how long
the report takes to gather.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, run_worker, table, write_section
from increcrawl_scrapy.commands.report import gather
from increcrawl_scrapy.state import StateReader, StateStore

SEED = "https://docs.example.com/sitemap.xml"
DAY = 86_400.0


def url(i: int) -> str:
    return f"https://docs.example.com/section-{i % 200}/page-{i}"


def worker(pages: int, runs: int, keep: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "state.sqlite"
        now = [1_700_000_000.0]
        recording = 0.0
        with StateStore(path, clock=lambda: now[0], history_runs=keep, flush_items=1000) as store:
            for run_number in range(runs):
                now[0] += DAY
                run = store.start_run(SEED)
                run.upsert((url(i), None) for i in range(pages))
                started = time.process_time()  # CPU: the machine may be shared
                for i in range(pages):
                    # A page in 20 changes each run; the others answer 304.
                    changed = (i + run_number) % 20 == 0 or run_number == 0
                    store.record(
                        url(i),
                        200 if changed else 304,
                        seed=SEED,
                        content_hash=f"{i}-{run_number}" if changed else None,
                    )
                store.flush()
                recording += time.process_time() - started
                run.finish({}, discovery_complete=True)
                store.finish_history(run)
            checks = store.database.execute("SELECT count(*) FROM checks").fetchone()[0]
        size = os.path.getsize(path)
        reader = StateReader.open(str(path))  # as the report command reads it
        started = time.perf_counter()
        report = gather(reader, now[0])
        gathering = time.perf_counter() - started
        reader.close()
        listed = sum(len(s["changes"]) for s in report["seeds"][0]["change_sets"])
    return {
        "keep": keep,
        "rate": pages * runs / recording,
        "size_mb": size / 2**20,
        "checks": checks,
        "gather_s": gathering,
        "listed": listed,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--keep", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        emit(worker(*args.worker))
        return
    script = str(Path(__file__).resolve())
    baseline = run_worker(script, str(args.pages), str(args.runs), "0")
    ours = run_worker(script, str(args.pages), str(args.runs), str(args.keep))
    rows = [
        [
            f"{result['keep']} runs" if result["keep"] else "none (baseline)",
            f"{result['rate']:,.0f}",
            f"{result['rate'] / baseline['rate']:.2f}x",
            f"{result['checks']:,}",
            f"{result['size_mb']:.1f} MB",
            f"{(result['size_mb'] - baseline['size_mb']) * 2**20 / max(1, result['checks']):.0f} B"
            if result["keep"]
            else "-",
            f"{result['gather_s']:.2f} s",
            f"{result['listed']:,}",
        ]
        for result in (baseline, ours)
    ]
    body = (
        f"{args.pages:,} pages, {args.runs} runs a day apart, every page fetched every run "
        "(a page in 20 changed, the rest 304), recorded through `StateStore.record`; checks "
        f"kept for the last {args.keep} runs against none, in the same run.\n\n"
        + table(
            [
                "checks kept",
                "results/CPU s",
                "vs baseline",
                "checks in the state",
                "file",
                "per check",
                "report gather",
                "changes listed",
            ],
            rows,
        )
    )
    print(body)
    if not args.no_write:
        write_section("Run history for the report", body)


if __name__ == "__main__":
    main()
