"""Several crawl processes on one PostgreSQL state, against the bound of the plan.

    python benchmarks/cluster.py [--pages 20000] [--latency 0.1] [--plan 16]
                                 [--per-worker 4] [--workers 1 2 4] [--lease 30]

A throwaway PostgreSQL server; the sample site and the stand-in API (answering after
``latency`` seconds, at most ``plan`` extractions at once) in a process of their own.
For each worker count W: a fresh database filled by one discovery-only crawl, then W
``scrapy crawl incremental`` processes (``GEONODE_CONCURRENCY`` = ``per-worker``,
single extracts) started together on the same seed. The fetch rate is measured over
the records' own times (first to last), against the bound min(plan, W x per-worker) /
latency. Then the same with the largest W and one worker SIGKILLed a third of the
way through (``INCRECRAWL_LEASE_SECONDS`` = ``lease``): every page must be recorded
once the others finish, and only the dead worker's pages fetched twice, after its
leases expired.
Target: at least 80% of the bound at 4 workers, no page fetched twice by live workers.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from benchmarks.common import table, write_section
from benchmarks.servers import KEY, servers
from tests.support.postgres import ThrowawayPostgres
from tests.support.process import crawl_env

ROOT = Path(__file__).resolve().parent.parent


def crawl(dsn: str, urls: dict, *settings: str, discover_only: bool = False) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", "incremental"]
    command += ["-a", f"sitemap_url={urls['sitemap']}", "-s", f"INCRECRAWL_DB={dsn}"]
    if discover_only:
        command += ["-a", "discover_only=1"]
    for setting in (
        f"GEONODE_API_URL={urls['api']}",
        f"GEONODE_API_KEY={KEY}",
        "GEONODE_BATCH_MIN_URLS=1000000000",  # single extracts
        "LOG_LEVEL=INFO",
        "TELNETCONSOLE_ENABLED=False",
        *settings,
    ):
        command += ["-s", setting]
    return command


def run(server: ThrowawayPostgres, urls: dict, name: str, workers: int, args, kill: bool) -> dict:
    import psycopg

    dsn = server.create_database(name)
    with tempfile.TemporaryDirectory() as workdir:
        done = subprocess.run(
            crawl(dsn, urls, discover_only=True),
            cwd=workdir,
            env=crawl_env(None),
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        requests.post(urls["api"] + "/_admin/reset-counters", json={}, timeout=10)
        settings: tuple[str, ...] = (f"GEONODE_CONCURRENCY={args.per_worker}",)
        if kill:  # short leases, so that the dead worker's pages come back soon
            settings += (f"INCRECRAWL_LEASE_SECONDS={args.lease}",)
        logs = [open(f"{workdir}/worker{i}.log", "wb") for i in range(workers)]  # noqa: SIM115
        started = time.monotonic()
        processes = [
            subprocess.Popen(
                crawl(dsn, urls, *settings),
                cwd=workdir,
                env=crawl_env(None),
                stdout=log,
                stderr=log,
            )
            for log in logs
        ]
        killed_at = None
        held: set[str] = set()
        if kill:
            with psycopg.connect(dsn, autocommit=True) as connection:
                while True:
                    (fetched,) = connection.execute(
                        "SELECT count(*) FROM pages WHERE fetch_count > 0"
                    ).fetchone()
                    if fetched >= args.pages // 3:
                        break
                    time.sleep(0.2)
                os.kill(processes[-1].pid, signal.SIGKILL)
                killed_at = time.time()
                owner_pid = f":{processes[-1].pid}:"
                held = {
                    key
                    for (key,) in connection.execute(
                        "SELECT normalized_url FROM leases WHERE owner LIKE %s", (f"%{owner_pid}%",)
                    )
                }
        for process in processes:
            process.wait(timeout=3600)
        wall = time.monotonic() - started
        for log in logs:
            log.close()
        counters = requests.get(urls["api"] + "/_admin/counters", timeout=10).json()
        with psycopg.connect(dsn, autocommit=True) as connection:
            first, last, recorded = connection.execute(
                "SELECT min(last_fetched), max(last_fetched), count(*) FROM pages "
                "WHERE fetch_count > 0"
            ).fetchone()
            twice = connection.execute(
                "SELECT count(*) FROM pages WHERE fetch_count > 1"
            ).fetchone()[0]
            late = 0
            if kill and held:
                late = connection.execute(
                    "SELECT count(*) FROM pages WHERE normalized_url = ANY(%s) "
                    "AND last_fetched >= %s",
                    (list(held), killed_at + args.lease),
                ).fetchone()[0]
    extracts = counters["requests"].get("/v1/extract", counters.get("extractions", 0))
    return {
        "workers": workers,
        "recorded": recorded,
        "rate": recorded / max(last - first, 1e-9),
        "wall": wall,
        "twice": twice,
        "extracts": extracts,
        "peak": counters["peak_concurrency"],
        "held": len(held),
        "late": late,
        "status": [process.returncode for process in processes],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=20_000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--plan", type=int, default=16)
    parser.add_argument("--per-worker", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--lease", type=float, default=30.0)
    args = parser.parse_args()
    rows = []
    with ThrowawayPostgres() as server, servers(args.pages, max(1, args.pages // 5000)) as urls:
        requests.post(
            urls["api"] + "/_admin/knobs",
            json={"latency": args.latency, "concurrency_limit": args.plan},
            timeout=10,
        ).raise_for_status()
        plans = [(w, False) for w in args.workers] + [(max(args.workers), True)]
        for number, (workers, kill) in enumerate(plans):
            result = run(server, urls, f"cluster{number}", workers, args, kill)
            bound = min(args.plan, workers * args.per_worker) / args.latency
            rows.append(
                [
                    f"{workers}" + (" (one killed)" if kill else ""),
                    f"{result['recorded']:,} / {args.pages:,}",
                    f"{result['rate']:.1f}",
                    f"{bound:.0f}",
                    f"{result['rate'] / bound:.0%}",
                    f"{result['extracts']:,}",
                    f"{result['twice']:,}",
                    f"{result['peak']} / {args.plan}",
                    f"{result['held']:,} held, {result['late']:,} re-fetched after expiry"
                    if kill
                    else "",
                    f"{result['wall']:.0f} s",
                ]
            )
            print(rows[-1], result["status"], flush=True)
    body = (
        f"{args.pages:,} due pages of one seed on a PostgreSQL state (a throwaway server on "
        f"127.0.0.1), fetched through the stand-in API answering after "
        f"{args.latency * 1000:.0f} ms with a plan limit of {args.plan} extractions at once; "
        f"each worker a `scrapy crawl incremental` process with GEONODE_CONCURRENCY="
        f'{args.per_worker}. Rate over the records\' own times; "fetched twice" counts pages '
        f"recorded twice; the killed run uses INCRECRAWL_LEASE_SECONDS={args.lease:g}.\n\n"
        + table(
            [
                "workers",
                "recorded",
                "pages/s",
                "bound",
                "of bound",
                "extracts",
                "recorded twice",
                "peak concurrency / plan",
                "killed worker's leases",
                "wall",
            ],
            rows,
        )
    )
    write_section("Several workers on one PostgreSQL state", body)


if __name__ == "__main__":
    main()
