"""A crawl on a PostgreSQL state a round trip away: does the reactor wait on it?

    python benchmarks/remote_db.py [--pages 3000] [--rtt 0 10 40] [--baseline 1ad09a2]

A throwaway PostgreSQL server behind a proxy on 127.0.0.1 that delays every packet
by half of ``rtt`` milliseconds each way (a database across a network); the sample
site in a process of its own. Each crawl runs in a fresh process, on a fresh
database: the ``incremental`` spider's first run (sitemap, then every page fetched
directly), and an ordinary spider with the add-on and ``INCRECRAWL_SKIP_NOT_DUE``
(every page requested from its start URLs). Measured over the fetching (first page
request to close): pages per second, and how long the reactor stalled, by a timer
that should fire every 10 ms (its longest delay, and the time lost in delays of more
than 20 ms). Each for this tree and for ``--baseline`` (the commit before recording
left the reactor's thread), in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import scrapy

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, run_worker, table, write_section
from benchmarks.first_run import worktree
from benchmarks.servers import servers

ROOT = Path(__file__).resolve().parent.parent
TICK = 0.01  # seconds between the stall timer's firings
STALL = 0.02  # a delay longer than this counts as a stall


@contextlib.contextmanager
def delayed(port: int, rtt_ms: float) -> Iterator[int]:
    """A TCP proxy to 127.0.0.1:*port* delaying each direction by rtt/2; its port."""
    loop = asyncio.new_event_loop()
    half = rtt_ms / 2000
    ready: list[int] = []

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            loop.call_later(half, writer.write, data)  # same delay each: order kept
        loop.call_later(half, writer.close)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))

    async def serve() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ready.append(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    thread = threading.Thread(target=lambda: loop.run_until_complete(serve()), daemon=True)
    thread.start()
    while not ready:
        time.sleep(0.01)
    try:
        yield ready[0]
    finally:
        loop.call_soon_threadsafe(loop.stop)


class PlainSpider(scrapy.Spider):
    """An ordinary spider: one item a page."""

    name = "plain"

    def __init__(self, urls: list[str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = urls

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "text": " ".join(response.css("p::text").getall())}


def crawl(tree: str, mode: str, dsn: str, urls: dict[str, str], pages: int) -> dict[str, Any]:
    """One crawl in this process with the code of *tree* (run by ``--worker``)."""
    sys.path.insert(0, tree)
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    import increcrawl_scrapy.settings as project

    assert Path(sys.modules["increcrawl_scrapy"].__file__).is_relative_to(tree)
    settings: dict[str, Any] = {
        "INCRECRAWL_DB": dsn,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "CONCURRENT_REQUESTS": 16,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
    }
    if mode == "incremental":
        settings = {
            **{name: getattr(project, name) for name in dir(project) if name.isupper()},
            **settings,
            "INCRECRAWL_FETCHER": "direct",
        }
        from increcrawl_scrapy.spiders.incremental import IncrementalSpider as spider_class

        arguments = {"sitemap_url": urls["sitemap"]}
    else:
        settings.update(
            {
                "ADDONS": {"increcrawl_scrapy.Addon": 300},
                "INCRECRAWL_SKIP_NOT_DUE": True,
                "ROBOTSTXT_OBEY": False,
            }
        )
        spider_class = PlainSpider  # type: ignore[assignment]
        arguments = {"urls": [f"{urls['site']}/page/{i}" for i in range(pages)]}
    marks: dict[str, float] = {}
    stalls = {"longest": 0.0, "lost": 0.0}
    last = [0.0]

    def tick() -> None:
        now = time.perf_counter()
        if "first" in marks:
            late = now - last[0] - TICK
            stalls["longest"] = max(stalls["longest"], late)
            if late > STALL:
                stalls["lost"] += late
        last[0] = now

    def scheduled(**_: Any) -> None:
        if "first" not in marks:
            marks["first"] = time.perf_counter()
            last[0] = marks["first"]

    process = CrawlerProcess(settings)
    crawler = process.create_crawler(spider_class)
    crawler.signals.connect(scheduled, signal=signals.request_scheduled, weak=False)
    crawler.signals.connect(
        lambda **_: marks.setdefault("closing", time.perf_counter()),
        signal=signals.spider_closed,
        weak=False,
    )

    def opened(**_: Any) -> None:
        from twisted.internet import task  # the crawl's reactor is installed by now

        task.LoopingCall(tick).start(TICK)

    crawler.signals.connect(opened, signal=signals.spider_opened, weak=False)
    process.crawl(crawler, **arguments)
    process.start()
    stats = crawler.stats.get_stats()
    fetched = stats.get("increcrawl/new", 0)
    seconds = marks["closing"] - marks["first"]
    return {"pages": fetched, "rate": fetched / seconds, **stalls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--rtt", type=float, nargs="+", default=[0.0, 10.0, 40.0])
    parser.add_argument("--baseline", default="1ad09a2")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        tree, mode, dsn, urls, pages = args.worker
        emit(crawl(tree, mode, dsn, json.loads(urls), int(pages)))
        return
    from tests.support.postgres import ThrowawayPostgres

    rows = []
    with (
        ThrowawayPostgres() as server,
        servers(args.pages) as urls,
        worktree(args.baseline) as baseline,
    ):
        port = server.port
        for rtt in args.rtt:
            with delayed(port, rtt) as proxy:
                for mode in ("incremental", "plain"):
                    for label, tree in (("this tree", str(ROOT)), (args.baseline, baseline)):
                        name = f"b{len(rows)}"
                        dsn = server.create_database(name).replace(f":{port}/", f":{proxy}/")
                        result = run_worker(
                            __file__, tree, mode, dsn, json.dumps(urls), str(args.pages)
                        )
                        rows.append(
                            [
                                f"{rtt:g} ms",
                                mode,
                                label,
                                f"{result['pages']:,}",
                                f"{result['rate']:.0f}",
                                f"{result['longest'] * 1000:.0f} ms",
                                f"{result['lost']:.2f} s",
                            ]
                        )
                        print(rows[-1], flush=True)
    header = ["database RTT", "spider", "code", "pages", "pages/s", "longest stall", "lost"]
    body = (
        "A crawl on a PostgreSQL state behind a proxy delaying each packet by half the "
        f"round trip; {args.pages:,} pages fetched directly from the sample site, 16 at "
        "a time, each crawl on a fresh database. *incremental*: the spider's first run "
        "(its fetching measured); *plain*: an ordinary spider with the add-on and "
        "SkipNotDue. Stalls: a reactor timer due every 10 ms, its longest delay and the "
        "time lost in delays over 20 ms, from the first page request to the close.\n\n"
        + table(header, rows)
    )
    write_section("A PostgreSQL state a round trip away", body)


if __name__ == "__main__":
    main()
