"""What each fetcher pays: Geonode tokens per run on a site of N pages with k changes
a run, direct vs geonode vs hybrid (the baseline: geonode, every check paid).

    python benchmarks/hybrid_tokens.py [--pages 200] [--changes 10] [--runs 4]

nginx serves the site on 127.0.0.1 (its own ETag, Last-Modified and 304s), the
stand-in Geonode API extracts (one token per extraction, as the API documents).
Each mode crawls its own copy of the site: a first run (every page new), then
``--runs`` runs three days apart, ``--changes`` pages edited before each; every page
is due in each run (adaptive policy, two-day ceiling), so a run checks all N.
Two hosts: ``honest`` answers direct requests (with 304s), ``blocked`` refuses them
(403) and lets only Geonode's through. Counted per steady run: tokens (the
stand-in's own count), the origin's direct requests, changes caught.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.defer import deferred_to_future
from scrapy.utils.reactor import install_reactor

from benchmarks.common import table, write_section

DAY = 86400.0
KEY = "bench-key-0123456789"
BLOCK_DIRECT = 'location ~ ^/page- { if ($http_user_agent !~* "Python-urllib") { return 403; } }'
MODES = ("geonode", "direct", "hybrid")


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def page(i: int, edit: int) -> str:
    return (
        f"<html><head><title>Page {i}</title></head><body><main><h1>Page {i}</h1>"
        f"<p>The text of page {i}, version {edit}, long enough to be a page.</p>"
        "</main></body></html>"
    )


def write_site(root: Path, base: str, pages: int) -> None:
    for i in range(pages):
        (root / f"page-{i}.html").write_text(page(i, 0))
    urls = "".join(f"<url><loc>{base}/page-{i}.html</loc></url>" for i in range(pages))
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


def settings(db: str, clock: Clock, mode: str, api_url: str) -> dict[str, Any]:
    from increcrawl_scrapy import settings as project

    values = {name: getattr(project, name) for name in dir(project) if name.isupper()}
    values.update(
        INCRECRAWL_DB=db,
        INCRECRAWL_CLOCK=clock,
        INCRECRAWL_FETCHER=mode,
        INCRECRAWL_POLICY="adaptive",
        INCRECRAWL_MAX_INTERVAL=2 * DAY,
        LOG_LEVEL="WARNING",
        TELNETCONSOLE_ENABLED=False,
        RETRY_TIMES=0,
        CONCURRENT_REQUESTS=16,
        GEONODE_CONCURRENCY=8,
        GEONODE_API_URL=api_url,
        GEONODE_BATCH_MIN_URLS=10**6,  # single extracts: one token each, like hybrid's
    )
    if mode != "direct":
        values["GEONODE_API_KEY"] = KEY
    return values


async def crawl(values: dict[str, Any], sitemap: str) -> dict[str, Any]:
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider

    crawler = Crawler(IncrementalSpider, Settings(values))
    await deferred_to_future(crawler.crawl(sitemap_url=sitemap))
    assert crawler.stats is not None
    return dict(crawler.stats.get_stats())


async def measure(host: str, mode: str, args: argparse.Namespace, work: Path) -> dict:
    from increcrawl_scrapy.testing import GeonodeStandIn
    from tests.support.nginx import nginx

    root = work / f"{host}-{mode}"
    root.mkdir()
    extra = BLOCK_DIRECT if host == "blocked" else ""
    with (
        GeonodeStandIn(api_keys=[KEY]) as api,
        nginx(root, work / f"nginx-{host}-{mode}", extra=extra) as (url, _log),
    ):
        write_site(root, url, args.pages)
        clock = Clock(1_800_000_000.0)
        values = settings(str(root / "state.sqlite"), clock, mode, api.url)
        sitemap = f"{url}/sitemap.xml"
        first = await crawl(values, sitemap)
        first_tokens = api.counters()["tokens_charged"]
        steady: list[dict[str, float]] = []
        for run in range(args.runs):
            for i in range(args.changes):  # k different pages each run
                number = (run * args.changes + i) % args.pages
                path = root / f"page-{number}.html"
                path.write_text(page(number, run + 1))
                stamp = path.stat().st_mtime + 60 * (run + 1)  # a later Last-Modified
                os.utime(path, (stamp, stamp))
            clock.now += 3 * DAY
            before = api.counters()["tokens_charged"]
            stats = await crawl(values, sitemap)
            direct = stats.get("downloader/request_count", 0) - stats.get("geonode/requests", 0)
            steady.append(
                {
                    "tokens": api.counters()["tokens_charged"] - before,
                    "caught": stats.get("increcrawl/changed", 0),
                    "direct": direct,
                }
            )
    return {
        "first": first_tokens,
        "first_new": first.get("increcrawl/new", 0),
        **{k: statistics.mean(run[k] for run in steady) for k in ("tokens", "caught", "direct")},
    }


async def main(args: argparse.Namespace) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for host in ("honest", "blocked"):
            found = {mode: await measure(host, mode, args, Path(tmp)) for mode in MODES}
            base = found["geonode"]["tokens"] or 1
            for mode in MODES:
                m = found[mode]
                per_change = f"{m['tokens'] / m['caught']:.2f}" if m["caught"] else "-"
                rows.append(
                    [
                        host,
                        mode,
                        m["first"],
                        f"{m['tokens']:.0f}",
                        f"{m['caught']:.0f} of {args.changes}",
                        per_change,
                        f"{m['direct']:.0f}",
                        f"{m['tokens'] / base:.3f}",
                    ]
                )
    body = (
        f"A site of {args.pages} pages, {args.changes} of them edited before each of "
        f"{args.runs} runs three days apart, every page due each run (means of those "
        "runs; the first run's tokens apart). `blocked`: nginx answers direct requests "
        "403, only Geonode's get the page.\n\n"
        + table(
            [
                "host",
                "fetcher",
                "first run: tokens",
                "tokens/run",
                "changes caught/run",
                "tokens per caught change",
                "direct requests/run",
                "tokens vs geonode",
            ],
            rows,
        )
    )
    write_section("Hybrid fetching: tokens per run", body)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--runs", type=int, default=4)
    arguments = parser.parse_args()
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    from twisted.internet import reactor

    loop = asyncio.get_event_loop()
    done = asyncio.ensure_future(main(arguments), loop=loop)
    done.add_done_callback(lambda _: reactor.stop())  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]
    done.result()
