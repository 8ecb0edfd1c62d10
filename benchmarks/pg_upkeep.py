"""A PostgreSQL state over many runs, and a claim on a large one.

    python benchmarks/pg_upkeep.py [--urls 100000] [--runs 30] [--claim-rows 10000000]
                                   [--baseline COMMIT]

*Runs*: a state of ``--urls`` rows, then ``--runs`` runs a day apart, each as a crawl
makes them: discovery of every URL (1% of them with a new lastmod), results for 1%
of the rows, missing rows marked. After each run (2 s after, and again once
autovacuum has been through the table: what the next run finds) the dead-tuple share of ``pages``
(``n_dead_tup / n_live_tup``, pg_stat_user_tables, autovacuum at the server's
defaults but for its naptime: 1 s, the runs being seconds apart here), the share
of updates that were HOT and the table's size. With ``--baseline``, the same for
that commit's code in the same run.

*Claim* (first, on a quiet server): ``--claim-rows`` rows written straight into
``pages`` (10,000 of them due), then a worker's claim of 100 due rows (what a crawl
leases at a time), timed five times, each by a fresh store; the median and the
slowest. Target: under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
if os.environ.get("BASELINE_TREE"):  # a worker on the baseline's code
    sys.path.insert(0, os.environ["BASELINE_TREE"])

from benchmarks.common import emit, run_worker, table, write_section
from benchmarks.first_run import worktree
from benchmarks.state_scale import CHUNK, NOW, SEED, chunks, entries, url

DAY = 86_400.0
CLAIM = 100
SETTLE_LIMIT = 600.0  # seconds to wait for autovacuum's pass after a run


def _stats(dsn: str) -> dict[str, float]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        live, dead, updates, hot = db.execute(
            "SELECT n_live_tup, n_dead_tup, n_tup_upd, n_tup_hot_upd "
            "FROM pg_stat_user_tables WHERE relname = 'pages'"
        ).fetchone()
        size = db.execute("SELECT pg_total_relation_size('pages')").fetchone()[0]
    return {
        "live": live,
        "dead": dead,
        "updates": updates,
        "hot": hot,
        "bytes": size,
    }


def settled(dsn: str, ended: float, limit: float = SETTLE_LIMIT) -> tuple[dict[str, float], float]:
    """The stats once autovacuum is done with ``pages`` after a run that *ended* (the
    server's clock): a pass that started after it, or dead tuples under autovacuum's
    own trigger (50 + 20% of the live rows, the server's defaults), when no pass
    comes. What the next run, a day later, finds; at most *limit* seconds."""
    import psycopg

    started = time.perf_counter()
    while True:
        now = _stats(dsn)
        with psycopg.connect(dsn, autocommit=True) as db:
            (last,) = db.execute(
                "SELECT extract(epoch FROM last_autovacuum) FROM pg_stat_user_tables "
                "WHERE relname = 'pages'"
            ).fetchone()
        waited = time.perf_counter() - started
        passed = last is not None and float(last) > ended
        if passed or now["dead"] <= 50 + 0.2 * now["live"] or waited > limit:
            return now, waited
        time.sleep(1)


def runs(n: int, count: int, dsn: str) -> dict[str, Any]:
    """The worker of *Runs* (this process's code: this tree or the baseline's)."""
    from increcrawl_scrapy.state import StateStore

    clock = [NOW]
    store = StateStore(dsn, clock=lambda: clock[0], flush_items=1000, flush_seconds=1e9)
    sitemap = "https://shop.example.com/s.xml"
    after: list[dict[str, float]] = []
    for number in range(count + 1):
        started = time.perf_counter()
        run = store.start_run(SEED)
        moved = range(number * n // 100, (number + 1) * n // 100) if number else range(0)
        listed = (
            (link, f"2025-01-{1 + number % 28:02d}" if i in moved else lastmod)
            for i, (link, lastmod) in enumerate(entries(n))
        )
        for chunk in chunks(listed, CHUNK):
            run.upsert(chunk, sitemap_url=sitemap)
        run.sitemap_read(sitemap, f"digest-{number}")
        for i in range(number * n // 100, (number + 1) * n // 100):
            store.record(url(i % n), 200, seed=SEED, content_hash=f"{number}:{i}")
        store.flush()
        run.mark_missing()
        run.finish({}, discovery_complete=True)
        seconds = time.perf_counter() - started
        ended = float(store.database.execute("SELECT extract(epoch FROM now())").fetchone()[0])
        # The stats of this connection's writes reach the view when it is next idle.
        store.database.execute("SELECT pg_stat_force_next_flush()")
        time.sleep(2)  # autovacuum's turn (naptime 1 s: runs here are seconds apart)
        if number:  # run 0 is the first discovery: no row rewritten yet
            right_after = _stats(dsn)
            calm, waited = settled(dsn, ended)
            after.append(
                {
                    **right_after,
                    "seconds": seconds,
                    "dead_settled": calm["dead"] / max(1, calm["live"]),
                    "settle_s": waited,
                }
            )
        clock[0] += DAY
    store.close()
    return {"urls": n, "runs": after}


def claim(n: int, dsn: str) -> dict[str, Any]:
    """The worker of *Claim*: *n* rows straight into pages, then five claims."""
    import psycopg

    from increcrawl_scrapy.state import StateStore

    StateStore(dsn).close()  # the schema
    due_every = max(1, n // 10_000)
    with psycopg.connect(dsn, autocommit=True) as db:
        started = time.perf_counter()
        for low in range(0, n, 1_000_000):
            db.execute(
                "INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, "
                "next_check, interval_s, host, sitemap_url) "
                "SELECT 'https://shop.example.com/item-' || i, "
                "'https://shop.example.com/item-' || i, %(seed)s, %(now)s, %(now)s, "
                "CASE WHEN i %% %(every)s = 0 THEN %(now)s - i ELSE %(now)s + 86400 + i END, "
                "86400, 'shop.example.com', 'https://shop.example.com/s.xml' "
                "FROM generate_series(%(low)s, %(high)s) AS i",
                {
                    "seed": SEED,
                    "now": NOW,
                    "every": due_every,
                    "low": low,
                    "high": min(n, low + 1_000_000) - 1,
                },
            )
        db.execute("VACUUM ANALYZE pages")
        filled = time.perf_counter() - started
    times = []
    for _ in range(5):
        store = StateStore(dsn, clock=lambda: NOW)
        started = time.perf_counter()
        rows = next(iter(store.due_chunks(SEED, size=CLAIM)))
        times.append(time.perf_counter() - started)
        assert len(rows) == CLAIM, len(rows)
        store.close()  # its leases go back
    return {"rows": n, "fill_s": filled, "claim_s": times}


def runs_table(results: list[tuple[str, dict[str, Any]]]) -> str:
    rows = []
    for label, result in results:
        for number, run in enumerate(result["runs"], start=1):
            if number in (1, 2, 5, 10, 20, 30) or number == len(result["runs"]):
                rows.append(
                    [
                        label,
                        number,
                        f"{run['dead'] / max(1, run['live']):.0%}",
                        f"{run['dead_settled']:.0%} ({run['settle_s']:.0f} s)"
                        if "dead_settled" in run
                        else "-",
                        f"{run['hot'] / max(1, run['updates']):.0%}",
                        f"{run['bytes'] / result['urls']:.0f} B/URL",
                        f"{run['seconds']:.1f} s",
                    ]
                )
    return table(
        [
            "code",
            "after run",
            "dead / live tuples, 2 s after",
            "once autovacuum passed (wait)",
            "HOT updates (all runs)",
            "pages",
            "run",
        ],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--claim-rows", type=int, default=10_000_000)
    parser.add_argument("--baseline", help="also the runs with this commit's code")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker[0] == "runs":
            emit(runs(int(args.worker[1]), int(args.worker[2]), args.worker[3]))
        else:
            emit(claim(int(args.worker[1]), args.worker[2]))
        return
    from tests.support.postgres import ThrowawayPostgres

    results = []
    with ThrowawayPostgres() as server:
        import psycopg

        with psycopg.connect(server.dsn(), autocommit=True) as admin:
            # Runs here are seconds apart, not a day: autovacuum looks every second.
            admin.execute("ALTER SYSTEM SET autovacuum_naptime = 1")
            admin.execute("SELECT pg_reload_conf()")
        here = Path(__file__).resolve()
        # The claim first: it is the timed part, and the runs leave autovacuum busy.
        claimed = (
            run_worker(
                str(here),
                "claim",
                str(args.claim_rows),
                server.create_database("claim"),
                timeout=7200,
            )
            if args.claim_rows
            else None
        )
        results.append(
            (
                "this tree",
                run_worker(
                    str(here),
                    "runs",
                    str(args.urls),
                    str(args.runs),
                    server.create_database("runs"),
                    timeout=7200,
                ),
            )
        )
        if args.baseline:
            with worktree(args.baseline) as tree:
                os.environ["BASELINE_TREE"] = tree
                try:
                    base = run_worker(
                        str(here),
                        "runs",
                        str(args.urls),
                        str(args.runs),
                        server.create_database("base"),
                        timeout=7200,
                    )
                finally:
                    del os.environ["BASELINE_TREE"]
            results.append((args.baseline, base))
    body = (
        f"A PostgreSQL state (a throwaway server, fsync off, autovacuum at its defaults but "
        "for a naptime of 1 s, runs here being seconds apart) of "
        f"{args.urls:,} URLs over {args.runs} runs a day apart: each lists every URL (1% "
        "with a new lastmod), records 1% of the rows and marks the missing; pages after "
        "each run: 2 s after it, and again once autovacuum has been through `pages` (what "
        "the next run, a day later, finds).\n\n" + runs_table(results)
    )
    if claimed:
        times = claimed["claim_s"]
        body += (
            f"\n\nA claim of {CLAIM} due rows on a state of {claimed['rows']:,} rows "
            f"(10,000 due), five times, each by a fresh store: median "
            f"{statistics.median(times) * 1000:.0f} ms, slowest {max(times) * 1000:.0f} ms "
            "(target: under 50 ms)."
        )
    write_section("PostgreSQL state over many runs", body)


if __name__ == "__main__":
    main()
