"""Memory over a long crawl through the add-on: 1,000,000 items (a thousand a page)
through ``ADDONS = {"increcrawl_scrapy.Addon": 300}`` with a pipeline before the
add-on's that hands on a copy of each item (``dict(item)``). What the add-on keeps
of a page lives until the page's items are settled, so the peak memory is flat
after the first 10,000 items: the table gives the process's peak RSS as items go
through, and its ratio to the peak after 10,000.

    python benchmarks/addon_memory.py [--items 1000000] [--per-page 1000] [--write]

``--before DIR`` measures another checkout's package too (``PYTHONPATH=DIR``, on
``--before-items``), for a before and after. Run by hand (minutes); not a timed test.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STEP = 10_000


class Copying:
    """A project's pipeline before the add-on's that hands on another object."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        return dict(item)


def measure(items: int, per_page: int) -> dict[str, Any]:
    """Run the crawl in this process; the peak RSS every STEP items."""
    import scrapy
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.send_body(200, b"<html><body><main>a page</main></body></html>", "text/html")

    pages = -(-items // per_page)

    class Many(scrapy.Spider):
        name = "many"

        def __init__(self, base: str = "", **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.base = base

        async def start(self) -> Any:
            for page in range(pages):
                yield scrapy.Request(f"{self.base}/page/{page}")

        def start_requests(self) -> Any:  # Scrapy 2.13 without start()
            for page in range(pages):
                yield scrapy.Request(f"{self.base}/page/{page}")

        def parse(self, response: Any) -> Any:
            page = int(response.url.rsplit("/", 1)[1])
            for index in range(per_page):
                yield {"url": response.url, "sku": f"{page}-{index}", "price": index % 97}

    server = LoopbackServer(Handler)
    server.start()
    samples: list[tuple[int, float, float]] = []
    seen = [0]
    started = time.perf_counter()
    sqlite_peak = _sqlite_highwater()

    def settled(**_: Any) -> None:
        seen[0] += 1
        if seen[0] % STEP == 0:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            samples.append((seen[0], peak, sqlite_peak()))

    work = tempfile.mkdtemp(prefix="addon-memory-")
    process = CrawlerProcess(
        {
            "ADDONS": {"increcrawl_scrapy.Addon": 300},
            "ITEM_PIPELINES": {f"{__name__}.Copying": 100},
            "INCRECRAWL_DB": os.path.join(work, "state.sqlite"),
            "LOG_LEVEL": "WARNING",
            "TELNETCONSOLE_ENABLED": False,
            "ROBOTSTXT_OBEY": False,
            "CONCURRENT_REQUESTS": 8,
        }
    )
    crawler = process.create_crawler(Many)
    crawler.signals.connect(settled, signal=signals.item_scraped)
    crawler.signals.connect(settled, signal=signals.item_dropped)
    process.crawl(crawler, base=server.url)
    process.start()
    server.stop()
    return {"items": seen[0], "seconds": time.perf_counter() - started, "samples": samples}


def _sqlite_highwater() -> Any:
    """The most memory SQLite's allocator has held in this process, in MB (its own
    count, from the library the sqlite3 module loaded): its page caches fill up to
    the configured size over a long crawl; nothing else of it grows."""
    import ctypes
    import ctypes.util
    import sqlite3

    sqlite3.connect(":memory:").close()  # the library is loaded
    name = ctypes.util.find_library("sqlite3")
    try:
        library = ctypes.CDLL(name or "libsqlite3.so.0")
        highwater = library.sqlite3_memory_highwater
    except (OSError, AttributeError):  # linked in statically: not told
        return lambda: float("nan")
    highwater.restype = ctypes.c_int64
    highwater.argtypes = [ctypes.c_int]
    return lambda: highwater(0) / 1024 / 1024


def run(items: int, per_page: int, source: str | None) -> dict[str, Any]:
    """The measurement in a fresh process (on *source*'s package, if given)."""
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join([source, str(ROOT)])
    command = [sys.executable, __file__, "--child", "--items", str(items)]
    command += ["--per-page", str(per_page)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def rows(result: dict[str, Any]) -> list[list[Any]]:
    samples = result["samples"]
    if not samples:
        return []
    first = samples[0][1]
    rest = samples[0][1] - (samples[0][2] if len(samples[0]) > 2 else 0.0)
    marks = {STEP, 50_000, 100_000, 250_000, 500_000, 750_000, 1_000_000, samples[-1][0]}
    out = []
    for count, peak, *sqlite in samples:
        if count not in marks:
            continue
        held = sqlite[0] if sqlite else float("nan")  # an older run's samples: not told
        out.append(
            [
                f"{count:,}",
                f"{peak:.0f} MB",
                f"{peak / first:.2f}x",
                f"{held:.0f} MB",
                f"{(peak - held) / rest:.2f}x",
            ]
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--per-page", type=int, default=1_000)
    parser.add_argument("--before", help="another checkout whose package to measure too")
    parser.add_argument("--before-items", type=int, default=100_000)
    parser.add_argument("--write", action="store_true", help="write RESULTS.md's section")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.items, args.per_page)))
        return
    sys.path.insert(0, str(ROOT))
    from benchmarks.common import table, write_section

    headers = [
        "items settled",
        "peak RSS",
        "of the peak at 10,000",
        "SQLite's peak (its caches)",
        "the rest, of its 10,000's",
    ]
    result = run(args.items, args.per_page, None)
    rate = result["items"] / result["seconds"]
    body = table(headers, rows(result)) + (
        f"\n\n{result['items']:,} items, {args.per_page:,} a page, a copying pipeline "
        f"before the add-on's; {result['seconds']:.0f} s ({rate:,.0f} items/s)."
    )
    if args.before:
        before = run(args.before_items, args.per_page, args.before)
        body += f"\n\nBefore (`{args.before}`), {before['items']:,} items:\n\n"
        body += table(headers, rows(before))
    print(body)
    if args.write:
        write_section("Add-on memory over a long crawl", body)


if __name__ == "__main__":
    main()
