"""Crawl throughput through the stand-in API, against the bound C / latency.

    python benchmarks/throughput.py [--pages 2000] [--latency 0.1] [--baseline-pages 200]

For C in 1, 4, 8, 16: the stand-in answers after `latency` seconds and allows C
extractions at once; `scrapy crawl incremental` fetches `pages` due pages with
GEONODE_CONCURRENCY = C. Beside it, in the same run, a plain loop that extracts the
pages one at a time with `requests` and records them. Then the CPU cost per page of
this project's own code (middleware, pipeline, state) with no latency at all.
Target: at least 80% of the bound at C = 8, the concurrency limit never exceeded.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, peak_rss_mb, run_worker, table, write_section
from benchmarks.servers import KEY, servers

LEVELS = (1, 4, 8, 16)


def crawl_worker(api: str, sitemap: str, concurrency: int, pages: int) -> dict:
    """One whole crawl in this process; returns the fetch phase's timing."""
    import resource

    from scrapy import signals
    from scrapy.crawler import CrawlerProcess

    from increcrawl_scrapy import settings as project
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider

    marks: dict[str, float] = {}

    def fetched(**_: object) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        marks.setdefault("first", now)
        marks.setdefault("first_cpu", cpu)
        marks["last"], marks["last_cpu"] = now, cpu

    with tempfile.TemporaryDirectory() as workdir:
        settings = {name: getattr(project, name) for name in dir(project) if name.isupper()}
        settings.update(
            {
                "INCRECRAWL_DB": f"{workdir}/bench.sqlite",
                "GEONODE_API_URL": api,
                "GEONODE_API_KEY": KEY,
                "GEONODE_CONCURRENCY": concurrency,
                "GEONODE_BATCH_MIN_URLS": 10**9,  # single extracts: what is measured here
                "CONCURRENT_REQUESTS": max(16, 2 * concurrency),
                "INCRECRAWL_FLUSH_ITEMS": 500,
                "LOG_LEVEL": "WARNING",
                "TELNETCONSOLE_ENABLED": False,
            }
        )
        process = CrawlerProcess(settings)
        crawler = process.create_crawler(IncrementalSpider)
        crawler.signals.connect(fetched, signal=signals.item_scraped)
        crawler.signals.connect(fetched, signal=signals.item_dropped)
        started = time.perf_counter()
        process.crawl(crawler, sitemap_url=sitemap)
        process.start()
        total = time.perf_counter() - started
        stats = crawler.stats.get_stats()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "pages": stats.get("increcrawl/new", 0),
        "fetch_s": marks["last"] - marks["first"],
        "total_s": total,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "fetch_cpu_s": marks["last_cpu"] - marks["first_cpu"],
        "peak_mb": peak_rss_mb(),
        "retries": stats.get("geonode/retries", 0),
    }


def baseline(api: str, site_pages: list[str], workdir: str) -> dict:
    """Extract one page at a time with requests, fingerprint and record it."""
    from increcrawl_scrapy.content.fingerprint import content_fingerprint
    from increcrawl_scrapy.state import StateStore

    store = StateStore(f"{workdir}/baseline.sqlite")
    session = requests.Session()
    started = time.perf_counter()
    for url in site_pages:
        answer = session.post(
            f"{api}/v1/extract",
            json={"url": url, "formats": ["markdown"]},
            headers={"X-Api-Key": KEY},
            timeout=60,
        ).json()
        store.record(
            url,
            answer["metadata"]["http_status"],
            seed="baseline",
            content_hash=content_fingerprint(answer["data"]["markdown"]),
        )
    store.close()
    return {"pages": len(site_pages), "fetch_s": time.perf_counter() - started}


def own_code_cost(pages: int, workdir: str) -> dict:
    """CPU per page of the middleware's mapping, the spider callback, the pipeline
    and the state store, called directly (no network, no Scrapy engine), in this
    process under the asyncio reactor: the spider's callback is a coroutine whose
    content work runs on its content thread."""
    from twisted.internet import asyncioreactor

    asyncioreactor.install()
    from scrapy.utils.defer import deferred_from_coro
    from twisted.internet import reactor

    result: dict = {}

    async def measure() -> None:
        try:
            result.update(await _own_code_cost(pages, workdir))
        finally:
            reactor.stop()

    reactor.callWhenRunning(lambda: deferred_from_coro(measure()))  # an asyncio task
    reactor.run()
    return result


async def _own_code_cost(pages: int, workdir: str) -> dict:
    from types import SimpleNamespace

    from scrapy import Request
    from scrapy.utils.defer import maybe_deferred_to_future
    from scrapy.utils.test import get_crawler
    from twisted.internet.defer import Deferred

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.content.markdown import html_to_markdown
    from increcrawl_scrapy.geonode.payload import build_response, extract_body
    from increcrawl_scrapy.pipelines import IncrementalStatePipeline
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider
    from increcrawl_scrapy.testing.site import SampleSite

    site = SampleSite(pages=pages)
    markdown = [html_to_markdown(site.page_html(i)) for i in range(pages)]
    urls = [f"https://shop.example.com/page/{i}" for i in range(pages)]
    crawler = get_crawler(
        IncrementalSpider, {"INCRECRAWL_DB": f"{workdir}/own.sqlite", "INCRECRAWL_FLUSH_ITEMS": 500}
    )
    crawler.spider = crawler._create_spider(sitemap_url="https://shop.example.com/sitemap.xml")
    # No engine runs here; the content thread's backlog would pause one.
    crawler.engine = SimpleNamespace(paused=False, pause=lambda: None, unpause=lambda: None)
    config = IncrecrawlConfig.from_settings(crawler.settings)
    pipeline = IncrementalStatePipeline.from_crawler(crawler)
    pipeline.open_spider()
    parts = {"middleware": 0.0, "spider": 0.0, "pipeline+state": 0.0}
    for url, text in zip(urls, markdown, strict=True):
        t0 = time.process_time()
        request = Request(url, meta={"increcrawl_url": url})
        body = extract_body(request, config)
        answer = {
            "data": {"markdown": text, "html": None},
            "metadata": {"url": body["url"], "http_status": 200},
            "tokens_charged": 1,
        }
        response = build_response(request, answer)
        t1 = time.process_time()
        [item] = list(await crawler.spider.parse_page(response))
        t2 = time.process_time()
        done = pipeline.process_item(item)
        if isinstance(done, Deferred):
            await maybe_deferred_to_future(done)
        t3 = time.process_time()
        parts["middleware"] += t1 - t0
        parts["spider"] += t2 - t1
        parts["pipeline+state"] += t3 - t2
    t0 = time.process_time()
    pipeline.store.flush()
    parts["pipeline+state"] += time.process_time() - t0
    pipeline.store.close()
    return {name: seconds / pages * 1e6 for name, seconds in parts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--baseline-pages", type=int, default=200)
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker and args.worker[0] == "own":
        emit(own_code_cost(int(args.worker[1]), args.worker[2]))
        return
    if args.worker:
        api, sitemap, concurrency, pages = args.worker
        emit(crawl_worker(api, sitemap, int(concurrency), int(pages)))
        return

    rows = []
    with servers(args.pages) as urls, tempfile.TemporaryDirectory() as workdir:
        admin = urls["api"] + "/_admin"
        requests.post(
            f"{admin}/knobs", json={"latency": args.latency, "concurrency_limit": 1}, timeout=10
        ).raise_for_status()
        site_pages = [f"{urls['site']}/page/{i}" for i in range(args.baseline_pages)]
        base = baseline(urls["api"], site_pages, workdir)
        base_rate = base["pages"] / base["fetch_s"]
        for level in LEVELS:
            requests.post(f"{admin}/knobs", json={"concurrency_limit": level}, timeout=10)
            requests.post(f"{admin}/reset-counters", json={}, timeout=10)
            result = run_worker(__file__, urls["api"], urls["sitemap"], str(level), str(args.pages))
            counters = requests.get(f"{admin}/counters", timeout=10).json()
            rate = result["pages"] / result["fetch_s"]
            bound = level / args.latency
            rows.append(
                [
                    level,
                    result["pages"],
                    f"{result['fetch_s']:.1f} s",
                    f"{rate:.1f}",
                    f"{bound:.0f}",
                    f"{rate / bound:.0%}",
                    f"{rate / base_rate:.1f}x",
                    f"{counters['peak_concurrency']} / {level}",
                    counters["statuses"].get("429", 0),
                    f"{result['peak_mb']:.0f} MB",
                ]
            )
        requests.post(
            f"{admin}/knobs", json={"latency": 0.0, "concurrency_limit": 1000}, timeout=10
        )
        zero = run_worker(__file__, urls["api"], urls["sitemap"], "8", str(args.pages))
        own = run_worker(__file__, "own", str(args.pages), workdir)

    body = (
        f"{args.pages} due pages through the stand-in API answering after "
        f"{args.latency * 1000:.0f} ms, at most C extractions at once (C = "
        "`GEONODE_CONCURRENCY` = the stand-in's work-concurrency limit). Baseline: a plain "
        f"loop extracting {args.baseline_pages} pages one at a time with `requests` and "
        f"recording them: {base_rate:.1f} pages/s.\n\n"
        + table(
            [
                "C",
                "pages",
                "fetch phase",
                "pages/s",
                "bound C/latency",
                "of bound",
                "vs baseline",
                "peak concurrency / limit",
                "429s",
                "peak memory",
            ],
            rows,
        )
        + "\n\nCPU per page of this project's own code, called directly "
        f"({args.pages} pages): "
        + ", ".join(f"{name} {micro:.0f} µs" for name, micro in own.items())
        + f"; total {sum(own.values()):.0f} µs. The whole crawl process at zero latency "
        f"(C = 8, Scrapy and aiohttp included): {zero['fetch_cpu_s'] / zero['pages'] * 1e6:.0f} µs "
        f"CPU per page during the fetch phase ({zero['cpu_s']:.1f} s for the whole process, "
        f"start-up and discovery included), {zero['pages'] / zero['fetch_s']:.0f} pages/s.\n"
    )
    write_section("Crawl throughput", body)


if __name__ == "__main__":
    main()
