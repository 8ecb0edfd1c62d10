"""The state store at scale: 1,000,000 URLs.

    python benchmarks/state_scale.py [--urls 1000000] [--baseline-urls 1000000]

Upsert every URL as discovered, build a change queue with 10,000 due rows, record
100,000 results, re-discover and mark missing. Beside it, in the same run, a
baseline doing the same with one SELECT and one commit() per row. Each side runs in
a fresh process so its peak memory is its own.
Targets: upsert of 1,000,000 in under 20 s, queue query under 200 ms, recording over
20,000 results/s, peak memory under 300 MB.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, peak_rss_mb, run_worker, table, write_section
from benchmarks.first_run import worktree
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.urls import normalize_url

SEED = "https://shop.example.com/sitemap.xml"
DUE, RECORDS, CHUNK = 10_000, 100_000, 20_000
NOW = 1_700_000_000.0


def url(i: int) -> str:
    return f"https://shop.example.com/category-{i % 500}/item-{i}"


def entries(count: int, skip_every: int = 0) -> Iterator[tuple[str, str]]:
    for i in range(count):
        if skip_every and i % skip_every == 0:
            continue
        yield url(i), f"2024-{1 + i % 12:02d}-01"


def chunks(items: Iterator, size: int) -> Iterator[list]:
    chunk = []
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def make_queue(path: str, due_every: int) -> None:
    # Fixture, not measured: all rows scheduled later except one in `due_every`.
    db = sqlite3.connect(path)
    db.execute(
        "UPDATE pages SET next_check = ? WHERE "
        "CAST(substr(normalized_url, instr(normalized_url, 'item-') + 5) AS INTEGER) % ? != 0",
        (NOW + 86400, due_every),
    )
    db.commit()
    db.close()


def make_queue_postgres(dsn: str, due_every: int) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute(
            "UPDATE pages SET next_check = %s WHERE CAST(substring(normalized_url FROM "
            "strpos(normalized_url, 'item-') + 5) AS INTEGER) %% %s != 0",
            (NOW + 86400, due_every),
        )


def ours(n: int, workdir: str, dsn: str | None = None) -> dict:
    path = dsn or f"{workdir}/ours.sqlite"
    clock = [NOW]
    store = StateStore(path, clock=lambda: clock[0], flush_items=1000, flush_seconds=1e9)
    result: dict = {"urls": n}
    run = store.start_run(SEED)
    started = time.perf_counter()
    for chunk in chunks(entries(n), CHUNK):
        run.upsert(chunk, sitemap_url="https://shop.example.com/s.xml")
    result["upsert_s"] = time.perf_counter() - started
    store.close()
    if dsn:
        make_queue_postgres(dsn, n // DUE)
    else:
        make_queue(path, n // DUE)
    store = StateStore(path, clock=lambda: clock[0], flush_items=1000, flush_seconds=1e9)
    started = time.perf_counter()
    queue = store.due(SEED)
    result["queue_s"] = time.perf_counter() - started
    result["queue_rows"] = len(queue)
    started = time.perf_counter()
    for page in queue:  # what a crawl does: record the pages the queue handed out
        store.record(
            page.url,
            200,
            seed=SEED,
            key=page.normalized_url,
            content_hash=f"{len(page.url):064x}",
        )
    store.flush()
    result["record_queued_s"] = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(min(RECORDS, n)):  # rows discovery made, never new ones
        store.record(url(i), 200, seed=SEED, content_hash=f"{i:064x}")
    store.flush()
    result["record_s"] = time.perf_counter() - started
    clock[0] += 3600
    run = store.start_run(SEED)
    started = time.perf_counter()
    for chunk in chunks(entries(n, skip_every=100), CHUNK):
        run.upsert(chunk, sitemap_url="https://shop.example.com/s.xml")
    result["rediscover_s"] = time.perf_counter() - started
    started = time.perf_counter()
    result["missing"] = run.mark_missing().marked
    result["missing_s"] = time.perf_counter() - started
    store.close()
    result["bytes_per_url"] = (_postgres_size(dsn) if dsn else _sqlite_size(path)) / n
    result["peak_mb"] = peak_rss_mb()
    return result


def _sqlite_size(path: str) -> int:
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    return Path(path).stat().st_size


def _postgres_size(dsn: str) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as db:
        db.execute("VACUUM")
        return int(db.execute("SELECT pg_database_size(current_database())").fetchone()[0])


def baseline(n: int, workdir: str) -> dict:
    """The naive way: one SELECT and one commit() per row (same schema, same WAL)."""
    path = f"{workdir}/baseline.sqlite"
    StateStore(path).close()  # the same schema
    db = sqlite3.connect(path)
    db.execute("PRAGMA synchronous=NORMAL")
    result: dict = {"urls": n}
    started = time.perf_counter()
    for link, lastmod in entries(n):
        key = normalize_url(link)
        row = db.execute(
            "SELECT sitemap_lastmod FROM pages WHERE normalized_url = ?", (key,)
        ).fetchone()
        if row is None:
            db.execute(
                "INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, "
                "interval_s, sitemap_lastmod) VALUES (?, ?, ?, ?, ?, 86400, ?)",
                (key, link, SEED, NOW, NOW, lastmod),
            )
        else:
            db.execute(
                "UPDATE pages SET last_seen = ?, sitemap_lastmod = ? WHERE normalized_url = ?",
                (NOW, lastmod, key),
            )
        db.commit()
    result["upsert_s"] = time.perf_counter() - started
    make_queue(path, n // DUE)
    started = time.perf_counter()
    queue = db.execute(
        "SELECT * FROM pages WHERE seed = ? AND gone = 0 AND next_check <= ? ORDER BY next_check",
        (SEED, NOW),
    ).fetchall()
    result["queue_s"] = time.perf_counter() - started
    result["queue_rows"] = len(queue)
    started = time.perf_counter()
    for i in range(min(RECORDS, n)):
        key = normalize_url(url(i))
        row = db.execute(
            "SELECT content_hash, interval_s, fetch_count FROM pages WHERE normalized_url = ?",
            (key,),
        ).fetchone()
        db.execute(
            "UPDATE pages SET content_hash = ?, last_fetched = ?, interval_s = ?, "
            "next_check = ?, fetch_count = ? WHERE normalized_url = ?",
            (f"{i:064x}", NOW, row[1] * 1.5, NOW + row[1], row[2] + 1, key),
        )
        db.commit()
    result["record_s"] = time.perf_counter() - started
    result["record_queued_s"] = result["record_s"]  # row by row, both are the same
    started = time.perf_counter()
    seen = set()
    for link, _lastmod in entries(n, skip_every=100):
        key = normalize_url(link)
        seen.add(key)
        db.execute("SELECT sitemap_lastmod FROM pages WHERE normalized_url = ?", (key,)).fetchone()
        db.execute(
            "UPDATE pages SET last_seen = ?, missing_runs = 0 WHERE normalized_url = ?",
            (NOW + 3600, key),
        )
        db.commit()
    result["rediscover_s"] = time.perf_counter() - started
    started = time.perf_counter()
    missing = 0
    for (key,) in db.execute("SELECT normalized_url FROM pages WHERE seed = ?", (SEED,)).fetchall():
        if key not in seen:
            db.execute(
                "UPDATE pages SET missing_runs = missing_runs + 1 WHERE normalized_url = ?", (key,)
            )
            db.commit()
            missing += 1
    result["missing"] = missing
    result["missing_s"] = time.perf_counter() - started
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    result["bytes_per_url"] = Path(path).stat().st_size / n
    result["peak_mb"] = peak_rss_mb()
    return result


def report(mine: dict, base: dict) -> str:
    def rate(r: dict, key: str, count: int) -> float:
        return count / r[key]

    rows = []
    for label, key, count_mine, count_base, target in [
        ("upsert (discovery)", "upsert_s", mine["urls"], base["urls"], "1M in < 20 s"),
        ("re-discovery, 1% gone", "rediscover_s", mine["urls"], base["urls"], ""),
        (
            "record results",
            "record_s",
            min(RECORDS, mine["urls"]),
            min(RECORDS, base["urls"]),
            "> 20,000/s",
        ),
        (
            "record results of queued rows",
            "record_queued_s",
            mine["queue_rows"],
            min(RECORDS, base["urls"]),
            "> 20,000/s",
        ),
    ]:
        ours_rate, base_rate = rate(mine, key, count_mine), rate(base, key, count_base)
        rows.append(
            [
                label,
                f"{mine[key]:.2f} s",
                f"{ours_rate:,.0f}/s",
                f"{base_rate:,.0f}/s",
                f"{ours_rate / base_rate:.1f}x",
                target,
            ]
        )
    rows.append(
        [
            "queue query (10,000 due)",
            f"{mine['queue_s'] * 1000:.0f} ms",
            f"{mine['queue_rows']:,} rows",
            f"{base['queue_s'] * 1000:.0f} ms",
            f"{base['queue_s'] / mine['queue_s']:.1f}x",
            "< 200 ms",
        ]
    )
    rows.append(
        [
            "mark missing",
            f"{mine['missing_s']:.2f} s",
            f"{mine['missing']:,} rows",
            f"{base['missing_s']:.2f} s",
            f"{base['missing_s'] / mine['missing_s']:.1f}x",
            "",
        ]
    )
    rows.append(
        [
            "peak memory",
            f"{mine['peak_mb']:.0f} MB",
            "",
            f"{base['peak_mb']:.0f} MB",
            "",
            "< 300 MB",
        ]
    )
    rows.append(
        [
            "database size",
            f"{mine['bytes_per_url']:.0f} B/URL",
            "",
            f"{base['bytes_per_url']:.0f} B/URL",
            "",
            "",
        ]
    )
    return f"{mine['urls']:,} URLs (baseline: {base['urls']:,}).\n\n" + table(
        ["operation", "ours", "ours rate", "baseline (row by row)", "speed-up", "target"], rows
    )


def side_by_side(lite: dict, pg: dict, base: dict | None = None, label: str = "") -> str:
    """SQLite beside PostgreSQL (and PostgreSQL at *label*, the code before), each
    PostgreSQL rate also as a share of SQLite's."""
    sides = [pg] + ([base] if base else [])

    def speeds(key: str, count: int) -> list[str]:
        return [
            cell
            for side in sides
            for cell in (
                f"{count / side[key]:,.0f}/s ({side[key]:.2f} s)",
                f"{lite[key] / side[key]:.2f}x",
            )
        ]

    rows = []
    for name, key, count in [
        ("upsert (discovery)", "upsert_s", lite["urls"]),
        ("re-discovery, 1% gone", "rediscover_s", lite["urls"]),
        ("record results", "record_s", min(RECORDS, lite["urls"])),
        ("record results of queued rows", "record_queued_s", lite["queue_rows"]),
    ]:
        rows.append([name, f"{count / lite[key]:,.0f}/s ({lite[key]:.2f} s)", *speeds(key, count)])
    for name, key, unit in [
        ("queue query (10,000 due; PostgreSQL: leased)", "queue_s", 1000),
        ("mark missing", "missing_s", 1),
    ]:
        shown = (lambda v: f"{v * 1000:.0f} ms") if unit == 1000 else (lambda v: f"{v:.2f} s")
        cells = [c for side in sides for c in (shown(side[key]), f"{lite[key] / side[key]:.2f}x")]
        rows.append([name, shown(lite[key]), *cells])
    rows.append(
        [
            "client peak memory",
            f"{lite['peak_mb']:.0f} MB",
            *[c for side in sides for c in (f"{side['peak_mb']:.0f} MB", "")],
        ]
    )
    rows.append(
        [
            "database size",
            f"{lite['bytes_per_url']:.0f} B/URL",
            *[c for side in sides for c in (f"{side['bytes_per_url']:.0f} B/URL", "")],
        ]
    )
    headers = ["operation", "SQLite", "PostgreSQL", "of SQLite"]
    if base:
        headers += [f"PostgreSQL at {label}", "of SQLite"]
    return (
        f"{lite['urls']:,} URLs, the same operations through the same StateStore; "
        "PostgreSQL 15 on the same machine (a throwaway server, fsync off)"
        + (f", this tree's and {label}'s in the same run" if base else "")
        + ".\n\n"
        + table(headers, rows)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--baseline-urls", type=int, default=1_000_000)
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="the same operations on PostgreSQL beside SQLite (a throwaway server)",
    )
    parser.add_argument(
        "--baseline",
        help="with --postgres: also the PostgreSQL side of this commit (the code before)",
    )
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, count = args.worker[0], int(args.worker[1])
        with tempfile.TemporaryDirectory() as workdir:
            if kind == "ours":
                emit(ours(count, workdir, *args.worker[2:]))
            else:
                emit(baseline(count, workdir))
        return
    if args.postgres:
        from tests.support.postgres import ThrowawayPostgres

        lite = run_worker(__file__, "ours", str(args.urls))
        base = None
        with ThrowawayPostgres() as server:
            if args.baseline:
                with worktree(args.baseline) as tree:
                    script = f"{tree}/benchmarks/state_scale.py"
                    base = run_worker(script, "ours", str(args.urls), server.create_database("b"))
            dsn = server.create_database("scale")
            pg = run_worker(__file__, "ours", str(args.urls), dsn)
        write_section("State store on PostgreSQL", side_by_side(lite, pg, base, args.baseline))
        return
    mine = run_worker(__file__, "ours", str(args.urls))
    base = run_worker(__file__, "baseline", str(args.baseline_urls))
    write_section("State store at scale", report(mine, base))


if __name__ == "__main__":
    main()
