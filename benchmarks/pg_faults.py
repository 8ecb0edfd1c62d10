"""Two crawl processes on one PostgreSQL state, under each fault of a real server.

    python benchmarks/pg_faults.py [--pages 1200] [--latency 0.05] [--lease 60]
                                   [--only NAME ...]

A throwaway PostgreSQL server; the sample site and the stand-in API in a process of
their own (as benchmarks/cluster.py). For each fault: a fresh database filled by one
discovery-only crawl, two ``scrapy crawl incremental`` workers started together on
the seed (each connection named by its worker: ``application_name``), the fault
injected once a third of the pages are recorded, then one more run (the next cron
run) that must complete what is left. Printed and written to RESULTS.md: pages
recorded by the faulted run and after the next one, pages recorded twice (two live
workers fetched one page), extractions paid and not recorded (a dead worker's), the
workers' exit codes, and the time from the fault's end to the next result written.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import requests

from benchmarks.cluster import crawl
from benchmarks.common import table, write_section
from benchmarks.servers import servers
from tests.support.postgres import ThrowawayPostgres
from tests.support.process import crawl_env

ROOT = Path(__file__).resolve().parent.parent
SKEW = 600.0  # ten minutes


def ten_minutes_ahead() -> float:
    return time.time() + SKEW


def ten_minutes_behind() -> float:
    return time.time() - SKEW


def _sql(dsn: str, statement: str, params: tuple = ()) -> list[tuple]:
    import psycopg

    # An administrator's connection: no statement timeout the database may set.
    with psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=0") as connection:
        cursor = connection.execute(statement, params or None)
        return cursor.fetchall() if cursor.description else []


def _recorded(dsn: str) -> int:
    return int(_sql(dsn, "SELECT count(*) FROM pages WHERE fetch_count > 0")[0][0])


_WORKERS = "application_name LIKE 'worker%'"


def _terminate(dsn: str, where: str = _WORKERS) -> int:
    return len(
        _sql(
            dsn,
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = current_database() AND {where}",
        )
    )


class Fault:
    """What to do to the server once a third of the pages are recorded; returns
    when the fault is over (the time to recover is counted from then)."""

    def __init__(self, name: str, inject: Callable[..., None] | None = None) -> None:
        self.name = name
        self.inject = inject


def restart(server: ThrowawayPostgres, dsn: str, processes: list) -> None:
    server.restart()


def terminate_each(server: ThrowawayPostgres, dsn: str, processes: list) -> None:
    pids = [row[0] for row in _sql(dsn, f"SELECT pid FROM pg_stat_activity WHERE {_WORKERS}")]
    for pid in pids:  # one connection at a time, each worker's main and claims ones
        _sql(dsn, "SELECT pg_terminate_backend(%s)", (pid,))
        time.sleep(0.5)


def statement_timeout(server: ThrowawayPostgres, dsn: str, processes: list) -> None:
    name = dsn.rsplit("/", 1)[1].split("?")[0]
    _sql(dsn, f"ALTER DATABASE {name} SET statement_timeout = '1ms'")
    _terminate(dsn)  # connected again, under the timeout: every statement is cancelled
    time.sleep(3)
    _sql(dsn, f"ALTER DATABASE {name} RESET statement_timeout")
    _terminate(dsn)


def row_locks(server: ThrowawayPostgres, dsn: str, processes: list) -> None:
    import psycopg

    blocker = psycopg.connect(dsn)  # a transaction left open by another client
    try:
        blocker.execute(
            "SELECT 1 FROM pages WHERE normalized_url IN (SELECT normalized_url FROM pages "
            "WHERE fetch_count = 0 ORDER BY normalized_url LIMIT 50) FOR UPDATE"
        )
        time.sleep(10)
    finally:
        blocker.rollback()
        blocker.close()


def kill_in_a_write(server: ThrowawayPostgres, dsn: str, processes: list) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        writing = _sql(
            dsn,
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'worker1' "
            "AND (state = 'idle in transaction' OR query LIKE 'UPDATE pages SET last_fetched%' "
            "OR query LIKE 'INSERT INTO hosts%')",
        )[0][0]
        if writing:
            break
        time.sleep(0.002)
    os.kill(processes[1].pid, signal.SIGKILL)


FAULTS = [
    Fault("none"),
    Fault("server restarted", restart),
    Fault("pg_terminate_backend on each connection", terminate_each),
    Fault("statement timeout (1 ms for 3 s)", statement_timeout),
    Fault("another client's transaction holding 50 rows' locks for 10 s", row_locks),
    Fault("a worker SIGKILLed inside a write", kill_in_a_write),
    Fault("clocks 10 min ahead and 10 min behind", None),
]


def run(server: ThrowawayPostgres, urls: dict, number: int, fault: Fault, args) -> list:
    dsn = server.create_database(f"fault{number}")
    env = {**crawl_env(None), "PYTHONPATH": str(ROOT)}
    settings = (
        f"GEONODE_CONCURRENCY={args.per_worker}",
        f"INCRECRAWL_LEASE_SECONDS={args.lease}",
        "INCRECRAWL_DB_LOCK_TIMEOUT=2",
    )
    with tempfile.TemporaryDirectory() as workdir:
        done = subprocess.run(
            crawl(dsn, urls, discover_only=True), cwd=workdir, env=env, capture_output=True
        )
        assert done.returncode == 0, done.stderr[-2000:]
        requests.post(urls["api"] + "/_admin/reset-counters", json={}, timeout=10)
        clocks = ["", ""]
        if "clocks" in fault.name:
            clocks = [
                "INCRECRAWL_CLOCK=benchmarks.pg_faults.ten_minutes_ahead",
                "INCRECRAWL_CLOCK=benchmarks.pg_faults.ten_minutes_behind",
            ]
        logs = [open(f"{workdir}/worker{i}.log", "wb") for i in range(2)]  # noqa: SIM115
        processes = [
            subprocess.Popen(
                crawl(f"{dsn}?application_name=worker{i}", urls, *settings, *filter(None, [clock])),
                cwd=workdir,
                env=env,
                stdout=log,
                stderr=log,
            )
            for i, (log, clock) in enumerate(zip(logs, clocks, strict=True))
        ]
        over_at = None
        if fault.inject is not None:
            while _recorded(dsn) < args.pages // 3 and all(p.poll() is None for p in processes):
                time.sleep(0.05)
            fault.inject(server, dsn, processes)
            over_at = time.time()
        recovered = None

        def watch() -> None:  # from the fault's end to the next result written
            nonlocal recovered
            before = None
            while over_at is not None and recovered is None:
                try:
                    now = _recorded(dsn)
                except Exception:  # the server may still be coming back
                    now = None
                if before is None:
                    before = now
                elif now is not None and now > before:
                    recovered = time.time() - over_at
                    return
                if all(p.poll() is not None for p in processes):
                    return
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        codes = [process.wait(timeout=3600) for process in processes]
        watcher.join()
        for log in logs:
            log.close()
        recorded = _recorded(dsn)
        twice = _sql(dsn, "SELECT count(*) FROM pages WHERE fetch_count > 1")[0][0]
        counters = requests.get(urls["api"] + "/_admin/counters", timeout=10).json()
        extracts = counters["extractions"]
        (fetches,) = _sql(dsn, "SELECT coalesce(sum(fetch_count), 0) FROM pages")[0]
        if "SIGKILL" in fault.name:
            time.sleep(args.lease)  # the dead worker's leases expire before the next run
        again = subprocess.run(
            crawl(dsn, urls, *settings), cwd=workdir, env=env, capture_output=True
        )
        after = _recorded(dsn)
        twice_after = _sql(dsn, "SELECT count(*) FROM pages WHERE fetch_count > 1")[0][0]
    return [
        fault.name,
        f"{recorded:,} / {args.pages:,}",
        f"{twice:,}",
        f"{extracts - fetches:,}",
        " ".join(str(code) for code in codes),
        "-" if recovered is None else f"{recovered:.1f} s",
        f"{after:,} (exit {again.returncode}, {twice_after - twice} twice)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=1200)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--plan", type=int, default=16)
    parser.add_argument("--per-worker", type=int, default=4)
    parser.add_argument("--lease", type=float, default=60.0)
    parser.add_argument("--only", nargs="*", help="faults whose name has one of these words")
    args = parser.parse_args()
    rows = []
    with ThrowawayPostgres() as server, servers(args.pages) as urls:
        requests.post(
            urls["api"] + "/_admin/knobs",
            json={"latency": args.latency, "concurrency_limit": args.plan},
            timeout=10,
        ).raise_for_status()
        for number, fault in enumerate(FAULTS):
            if args.only and not any(word in fault.name for word in args.only):
                continue
            rows.append(run(server, urls, number, fault, args))
            print(rows[-1], flush=True)
    body = (
        f"{args.pages:,} due pages of one seed on a PostgreSQL state (a throwaway server on "
        f"127.0.0.1), two `scrapy crawl incremental` workers (stand-in API, "
        f"{args.latency * 1000:.0f} ms an extraction, GEONODE_CONCURRENCY={args.per_worker} "
        f"each, INCRECRAWL_LEASE_SECONDS={args.lease:g}, INCRECRAWL_DB_LOCK_TIMEOUT=2); the "
        'fault once a third are recorded. "Recorded twice": pages two workers fetched and '
        'recorded; "paid, not recorded": extractions whose result no worker wrote (a dead '
        "worker's buffer); exit codes as README's Exit codes; recovery: from the fault's "
        "end to the next result written; after the SIGKILL the next run starts once the "
        "dead worker's leases expired.\n\n"
        + table(
            [
                "fault",
                "recorded",
                "recorded twice",
                "paid, not recorded",
                "exit codes",
                "time to recover",
                "after the next run",
            ],
            rows,
        )
    )
    write_section("PostgreSQL faults", body)


if __name__ == "__main__":
    main()
