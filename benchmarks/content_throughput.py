"""A first run's rate with the content work included, beside Scrapy's own SitemapSpider.

    python benchmarks/content_throughput.py [--pages 3000] [--repeat 2] [--shapes main,none,bare]
        [--also CHECKOUT]  # one more row: the crawl with another checkout's package

The same site (PAGES pages of about 6 KB, each with a menu, a sidebar and a footer
around its <main>; with ``none``, the same pages marking no main element, their content
in a ``<div class="content">``, a name trafilatura's catalog knows; with ``bare``, in a
div of no known name, so the main content is trafilatura's extraction) behind nginx,
the same concurrency, a whole process each: a plain ``SitemapSpider`` subclass that
yields an item of each page's title and text, and ``scrapy crawl incremental`` in
direct mode (discovery, the main content, its markdown, the fingerprint, the state).
Targets (#51, 10): the incremental first run at 0.8x the rate of SitemapSpider given
the same ``CONCURRENT_ITEMS`` (8) with ``<main>``, 0.6x where trafilatura extracts
(``bare``); ours twice, with ``INCRECRAWL_CONTENT_PROCESSES = auto`` (a worker process
where a second core is there) and with its pages' texts on the content thread
(``INCRECRAWL_CONTENT_PROCESSES=0``); ``auto`` is the default. The CPU column counts
the crawl's process and its worker.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section

_SPIDER = textwrap.dedent(
    """
    import scrapy
    from scrapy.spiders import SitemapSpider

    class Plain(SitemapSpider):
        name = "plain"
        def __init__(self, sitemap_url, **kwargs):
            super().__init__(**kwargs)
            self.sitemap_urls = [sitemap_url]
        def parse(self, response):
            text = response.css("main ::text, .content ::text, .c7 ::text").getall()
            yield {"url": response.url, "title": response.css("title::text").get(),
                   "text": " ".join(text)}
    """
)
_WORDS = "the crawler keeps each page with its own state and fetches it again"
#: The content's container, by shape: one the page names as content (trafilatura's
#: catalog knows ``content``), and one of no known name (trafilatura's extraction).
_DIVS = {"none": "content", "bare": "c7"}
_SETTINGS = [
    "-s",
    "CONCURRENT_REQUESTS=16",
    "-s",
    "LOG_LEVEL=WARNING",
    "-s",
    "TELNETCONSOLE_ENABLED=False",
]


def write_site(root: Path, base: str, pages: int, shape: str = "main") -> None:
    menu = "".join(f'<li><a href="/p/{i}.html">Page {i}</a></li>' for i in range(40))
    words = _WORDS.split(" ")
    for i in range(pages):
        paragraphs = "".join(
            "<p>" + " ".join(words[(i + j + k) % len(words)] for k in range(60)) + "</p>"
            for j in range(8)
        )
        (root / "p").mkdir(exist_ok=True)
        (root / "p" / f"{i}.html").write_text(
            f"<!doctype html><html><head><title>Page {i}</title></head><body>"
            f"<header><nav><ul>{menu}</ul></nav></header><aside>Latest: Page {i - 1}</aside>"
            + (
                f"<main><h1>Page {i}</h1>{paragraphs}</main>"
                if shape == "main"
                else f'<div class="{_DIVS[shape]}"><h1>Page {i}</h1>{paragraphs}</div>'
            )
            + "<footer>(c) 2026</footer></body></html>"
        )
    urls = "".join(f"<url><loc>{base}/p/{i}.html</loc></url>" for i in range(pages))
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one whole process: the CPU
    figure is the steadier one on a machine shared with other work."""
    started = time.perf_counter()
    cpu_before = _children_cpu()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return time.perf_counter() - started, _children_cpu() - cpu_before


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--shapes", default="main,none,bare")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--also",
        type=Path,
        help="another checkout (an export of main, or of a change tried): its crawl "
        "measured in the same run, interleaved, as one more row",
    )
    args = parser.parse_args()
    sections, verdicts = [], []
    if args.also is not None:
        LABELS["also"] = f"the same, the package at {args.also}"
    for shape in args.shapes.split(","):
        rate, cpu, best = measure(shape, args.pages, args.repeat, args.also)
        sections.append(f"Pages {SHAPES[shape]}:\n\n" + _table(rate, cpu, best))
        verdicts.append(
            f"{shape}: {rate['ours'] / rate['plain8']:.2f}x "
            f"(on the thread {rate['thread'] / rate['plain8']:.2f}x)"
        )
    result = "\n\n".join(sections)
    print(result)
    print("; ".join(verdicts))
    if not args.no_write:
        write_section(
            "First run with the content work, beside SitemapSpider",
            f"{args.pages} pages of about 6 KB behind nginx, CONCURRENT_REQUESTS=16, each a "
            f"whole process, best of {args.repeat}. Targets against SitemapSpider given "
            f"CONCURRENT_ITEMS=8: 0.8x with a main element, 0.6x where trafilatura "
            f"extracts ({'; '.join(verdicts)}).\n\n{result}\n",
        )


SHAPES = {
    "main": "marking their main element (<main>)",
    "none": 'marking none, their content in a <div class="content">',
    "bare": 'marking none, their content in a <div class="c7"> (trafilatura extracts it)',
}
LABELS = {
    "plain": "SitemapSpider (plain Scrapy)",
    "plain8": "SitemapSpider, CONCURRENT_ITEMS=8 as ours",
    "ours": "scrapy crawl incremental (direct, INCRECRAWL_CONTENT_PROCESSES=auto, the default)",
    "thread": "the same on the content thread (INCRECRAWL_CONTENT_PROCESSES=0)",
}


def measure(
    shape: str, pages: int, repeat: int, also: Path | None = None
) -> tuple[dict, dict, dict]:
    """Per way of crawling: pages a second, CPU ms a page, (wall, CPU) of the best run."""
    from tests.support.nginx import nginx
    from tests.support.process import crawl_command, crawl_env

    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        www = root / "www"
        www.mkdir()
        (root / "plain.py").write_text(_SPIDER)
        with nginx(www, root / "nginx") as (url, _access):
            write_site(www, url, pages, shape)
            sitemap = f"{url}/sitemap.xml"
            env = crawl_env(None)
            # Plain Scrapy: not this project's settings (its add-on and pipeline).
            plain_env = {k: v for k, v in env.items() if k != "SCRAPY_SETTINGS_MODULE"}
            plain = [
                sys.executable,
                "-m",
                "scrapy",
                "runspider",
                str(root / "plain.py"),
                "-a",
                f"sitemap_url={sitemap}",
                "-o",
                str(root / "plain.jsonl"),
                *_SETTINGS,
            ]

            # The project's settings lower CONCURRENT_ITEMS (scrapy/scrapy#5182): the
            # same plain spider given it too, so that gain is told apart from ours.
            plain8 = [*plain, "-s", "CONCURRENT_ITEMS=8"]

            def ours(n: int, *more: str, tag: str = "") -> list[str]:
                # A state of its own by settings: the thread's run after auto's, on
                # auto's state, was a second run (nothing due: 0.9 s for 3000 pages).
                state = tag + "-".join(more).replace("=", "_")
                return crawl_command(
                    sitemap,
                    root / f"s{n}-{state}.sqlite",
                    "INCRECRAWL_FETCHER=direct",
                    *more,
                    *(pair for pair in _SETTINGS if pair != "-s"),
                    feed=root / f"ours{n}.jsonl",
                )

            times: dict[str, list[tuple[float, float]]] = {name: [] for name in LABELS}
            here = Path(__file__).parent.parent
            for n in range(repeat):  # interleaved: a load that comes and goes hits each
                times["plain"].append(timed(plain, root, plain_env))
                times["plain8"].append(timed(plain8, root, plain_env))
                times["ours"].append(timed(ours(n, "INCRECRAWL_CONTENT_PROCESSES=auto"), here, env))
                times["thread"].append(timed(ours(n, "INCRECRAWL_CONTENT_PROCESSES=0"), here, env))
                if also is not None:  # its own package first on the path, from its folder
                    other = {**env, "PYTHONPATH": str(also)}
                    times["also"].append(timed(ours(n, tag="also"), also, other))
    best = {name: min(values) for name, values in times.items()}  # by wall time
    rate = {name: pages / wall for name, (wall, _cpu) in best.items()}
    cpu = {name: 1000 * min(c for _w, c in values) / pages for name, values in times.items()}
    return rate, cpu, best


def _table(rate: dict, cpu: dict, best: dict) -> str:
    rows = [
        [
            label,
            f"{best[name][0]:.1f} s",
            f"{rate[name]:.0f}",
            f"{rate[name] / rate['plain']:.2f}x",
            f"{rate[name] / rate['plain8']:.2f}x",
            f"{cpu[name]:.2f} ms",
            f"{cpu['plain'] / cpu[name]:.2f}x",
        ]
        for name, label in LABELS.items()
    ]
    return table(
        [
            "first run",
            "whole process (best of runs)",
            "pages/s",
            "vs SitemapSpider",
            "vs CONCURRENT_ITEMS=8",
            "CPU per page",
            "vs SitemapSpider (CPU)",
        ],
        rows,
    )


if __name__ == "__main__":
    main()
