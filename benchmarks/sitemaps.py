"""Sitemap discovery at the protocol's limits, beside ultimate-sitemap-parser.

    python benchmarks/sitemaps.py [--children 20] [--per-child 50000]

The sample site serves a sitemap index of `children` gzipped child sitemaps of
`per-child` URLs each (50,000 is the protocol's per-file maximum). The incremental
spider discovers them through Scrapy into an empty database (`-a discover_only=1`);
in the same run, ultimate-sitemap-parser reads the same site. Each runs in a fresh
process, so each peak memory is its own.
Target: memory stays bounded (no whole-document trees), no slower than the peer.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, peak_rss_mb, run_worker, table, write_section
from benchmarks.servers import servers


def ours(sitemap: str) -> dict:
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from increcrawl_scrapy import settings as project
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider

    with tempfile.TemporaryDirectory() as workdir:
        settings = {name: getattr(project, name) for name in dir(project) if name.isupper()}
        settings.update(
            {
                "INCRECRAWL_DB": f"{workdir}/discovery.sqlite",
                "INCRECRAWL_FETCHER": "direct",
                "LOG_LEVEL": "WARNING",
                "TELNETCONSOLE_ENABLED": False,
            }
        )
        process = CrawlerProcess(settings)
        crawler = process.create_crawler(IncrementalSpider)
        marks: dict[str, float] = {}
        crawler.signals.connect(
            lambda **_: marks.setdefault("opened", time.perf_counter()),
            signal=signals.spider_opened,
            weak=False,
        )
        crawler.signals.connect(
            lambda **_: marks.setdefault("closed", time.perf_counter()),
            signal=signals.spider_closed,
            weak=False,
        )
        process.crawl(crawler, sitemap_url=sitemap, discover_only="1")
        process.start()
        urls = crawler.stats.get_value("increcrawl/discovered", 0)
        size = Path(f"{workdir}/discovery.sqlite").stat().st_size
    return {
        "urls": urls,
        "seconds": marks["closed"] - marks["opened"],
        "peak_mb": peak_rss_mb(),
        "db_mb": size / 2**20,
    }


def peer(site: str) -> dict:
    from usp.tree import sitemap_tree_for_homepage

    started = time.perf_counter()
    tree = sitemap_tree_for_homepage(site + "/")
    urls = sum(1 for _ in tree.all_pages())
    return {"urls": urls, "seconds": time.perf_counter() - started, "peak_mb": peak_rss_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--per-child", type=int, default=50_000)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, url = args.worker
        emit(ours(url) if kind == "ours" else peer(url))
        return
    pages = args.children * args.per_child

    def speed(result: dict) -> float:
        return result["urls"] / result["seconds"]

    with servers(pages, args.children) as urls:
        mine = run_worker(__file__, "ours", urls["sitemap"])
        other = run_worker(__file__, "peer", urls["site"])
    rows = []
    for name, result in (
        ("increcrawl-scrapy (Scrapy, into SQLite)", mine),
        ("ultimate-sitemap-parser 1.x (in memory)", other),
    ):
        rows.append(
            [
                name,
                f"{result['urls']:,}",
                f"{result['seconds']:.1f} s",
                f"{result['urls'] / result['seconds']:,.0f}",
                f"{result['peak_mb']:.0f} MB",
            ]
        )
    body = (
        f"A sitemap index of {args.children} gzipped children of {args.per_child:,} URLs "
        f"({pages:,} URLs) served by the sample site on 127.0.0.1.\n\n"
        + table(["discovery by", "URLs", "time", "URLs/s", "peak memory"], rows)
        + f"\n\nSpeed ratio (ours / peer): {speed(mine) / speed(other):.2f}x; "
        f"memory ratio: {mine['peak_mb'] / other['peak_mb']:.2f}x. Ours also wrote every URL "
        f"to the state database ({mine['db_mb']:.0f} MB); the peer keeps them in memory.\n"
    )
    write_section("Sitemap discovery", body)


if __name__ == "__main__":
    main()
