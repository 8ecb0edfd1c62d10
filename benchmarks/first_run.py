"""A first run on a very large site: discovery of N URLs, then the first fetches.

    python benchmarks/first_run.py [--urls 1000000 10000000] [--fetch 2000]
                                   [--baseline 834c8fd] [--baseline-urls 1000000]

For each N the sample site serves a sitemap index of N / 50,000 gzipped children on
127.0.0.1. A fresh process crawls it with the incremental spider into an empty
database through the stand-in API (single extracts, no latency) and closes after
``--fetch`` pages (CLOSESPIDER_ITEMCOUNT). Measured in that process: discovery time
(the upsert of every URL), the time from the end of discovery to the first page
request Scrapy schedules, its peak RSS, the database's size per URL; then, on the
database it left, the latency of reading chunks of the due queue.

The baseline is the same crawl with the code of ``--baseline`` (the commit before
the queue was streamed: every due row read at once, every request handed to
Scrapy's scheduler), run at ``--baseline-urls`` only: at 10,000,000 URLs it would
need several GB.
Targets at 10,000,000 URLs: peak RSS under 500 MB, first page request within 5 s
of discovery's end, upsert (discovery) under 4 minutes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, peak_rss_mb, run_worker, table, write_section
from benchmarks.servers import KEY, servers

ROOT = Path(__file__).resolve().parent.parent

PER_CHILD = 50_000  # the protocol's maximum per sitemap file
CHUNKS_TIMED = 20


def crawl(tree: str, urls: dict[str, str], fetch: int) -> dict:
    """One first run in this process, with the package found in *tree*."""
    sys.path.insert(0, tree)
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    import increcrawl_scrapy
    from increcrawl_scrapy import settings as project
    from increcrawl_scrapy.spiders import incremental

    assert Path(increcrawl_scrapy.__file__).resolve().is_relative_to(Path(tree).resolve())
    marks: dict[str, float] = {}
    judge = incremental.after_discovery  # called once discovery is over

    def after_discovery(*args: object, **kwargs: object) -> object:
        marks["discovered"] = time.perf_counter()
        return judge(*args, **kwargs)

    incremental.after_discovery = after_discovery  # type: ignore[assignment]

    def scheduled(request: object, **_: object) -> None:
        marks.setdefault("first_request", time.perf_counter())

    with tempfile.TemporaryDirectory() as workdir:
        path = f"{workdir}/first.sqlite"
        settings = {name: getattr(project, name) for name in dir(project) if name.isupper()}
        settings.update(
            {
                "INCRECRAWL_DB": path,
                "GEONODE_API_URL": urls["api"],
                "GEONODE_API_KEY": KEY,
                "GEONODE_CONCURRENCY": 16,
                "GEONODE_BATCH_MIN_URLS": 10**9,  # single extracts: their requests are seen
                "CLOSESPIDER_ITEMCOUNT": fetch,
                "LOG_LEVEL": "WARNING",
                "TELNETCONSOLE_ENABLED": False,
            }
        )
        process = CrawlerProcess(settings)
        crawler = process.create_crawler(incremental.IncrementalSpider)
        crawler.signals.connect(
            lambda **_: marks.setdefault("opened", time.perf_counter()),
            signal=signals.spider_opened,
            weak=False,
        )
        crawler.signals.connect(scheduled, signal=signals.request_scheduled, weak=False)
        process.crawl(crawler, sitemap_url=urls["sitemap"])
        process.start()
        peak = peak_rss_mb()
        stats = crawler.stats.get_stats()
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        size = Path(path).stat().st_size
        chunk_ms = _chunk_latency(path, crawler.spider.increcrawl_seed)
    discovered = stats.get("increcrawl/discovered", 0)
    return {
        "urls": discovered,
        "fetched": stats.get("increcrawl/new", 0),
        "discovery_s": marks["discovered"] - marks["opened"],
        "first_request_s": marks["first_request"] - marks["discovered"],
        "peak_mb": peak,
        "bytes_per_url": size / max(discovered, 1),
        "chunk_ms": chunk_ms,
    }


def _chunk_latency(path: str, seed: str) -> list[float]:
    """Milliseconds to read each of the first chunks of the due queue (code before the
    streamed queue: the one read of the whole due set, negative)."""
    from increcrawl_scrapy.state import StateStore

    store = StateStore(path)
    try:
        if not hasattr(store, "due_chunks"):
            started = time.perf_counter()
            store.due(seed)
            return [-(time.perf_counter() - started) * 1000]
        times = []
        chunks = store.due_chunks(seed, None, 10_000)
        while len(times) < CHUNKS_TIMED:
            started = time.perf_counter()
            chunk = next(chunks, None)
            if not chunk:
                break
            times.append((time.perf_counter() - started) * 1000)
        return times
    finally:
        store.close()


@contextlib.contextmanager
def worktree(commit: str) -> Iterator[str]:
    """The repository at *commit*, checked out in a temporary directory."""
    with tempfile.TemporaryDirectory() as parent:
        path = f"{parent}/tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", path, commit],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield path
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", path], cwd=ROOT, capture_output=True
            )


def _row(label: str, result: dict) -> list[str]:
    chunks = result["chunk_ms"]
    if chunks[0] < 0:
        chunk = f"all due rows at once: {-chunks[0] / 1000:.1f} s"
    else:
        middle = statistics.median(chunks[1:] or chunks)
        chunk = f"{chunks[0]:.0f} / {middle:.0f} / {max(chunks):.0f} ms"
    return [
        label,
        f"{result['urls']:,}",
        f"{result['discovery_s']:.0f} s ({result['urls'] / result['discovery_s']:,.0f}/s)",
        f"{result['first_request_s']:.2f} s",
        chunk,
        f"{result['peak_mb']:.0f} MB",
        f"{result['bytes_per_url']:.0f} B",
        f"{result['fetched']:,}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--urls", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--fetch", type=int, default=2000)
    parser.add_argument("--baseline", default="834c8fd")
    parser.add_argument("--baseline-urls", type=int, default=1_000_000)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        tree, urls, fetch = args.worker
        emit(crawl(tree, json.loads(urls), int(fetch)))
        return
    rows = []
    for count in args.urls:
        with servers(count, max(1, -(-count // PER_CHILD))) as urls:
            mine = run_worker(__file__, str(ROOT), json.dumps(urls), str(args.fetch))
            rows.append(_row("this commit", mine))
            print(rows[-1], flush=True)
            if args.baseline and count == args.baseline_urls:
                with worktree(args.baseline) as tree:
                    base = run_worker(__file__, tree, json.dumps(urls), str(args.fetch))
                rows.append(_row(f"baseline ({args.baseline})", base))
                print(rows[-1], flush=True)
    body = (
        f"A first run: discovery of N URLs from a sitemap index of gzipped children of "
        f"{PER_CHILD:,} on 127.0.0.1, then {args.fetch:,} pages through the stand-in API "
        "(single extracts, no latency), in a fresh process each. Queue chunks: the first "
        f"/ the median of the next {CHUNKS_TIMED - 1} / the slowest, 10,000 due rows each.\n\n"
        + table(
            [
                "code",
                "URLs",
                "discovery (upsert)",
                "discovery end to first page request",
                "queue chunk read",
                "peak RSS",
                "database per URL",
                "pages fetched",
            ],
            rows,
        )
        + "\n\nTargets at 10,000,000 URLs: peak RSS < 500 MB, first page request within 5 s "
        "of discovery's end, discovery (upsert) < 4 min.\n"
    )
    write_section("First run on a large site", body)


if __name__ == "__main__":
    main()
