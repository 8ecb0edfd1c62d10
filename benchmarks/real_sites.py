"""Real generators' sites over 30 simulated days: false changes, requests, edits caught.

    python benchmarks/real_sites.py [--days 30] [--pages 40] [--generators mkdocs,sphinx,hugo]

Each site (MkDocs's default theme, Sphinx's alabaster, a Hugo layout with a menu and
a "recent posts" box) is served by nginx and crawled once a simulated day by
``scrapy crawl incremental`` (direct fetches, a clock shifted a day a run), with 2
real edits a day. Growing: a page added each week, which every page's navigation
lists. Beside it, in the same run: the same site not growing (the target: the last
week's requests within 10% of it) and the whole page fingerprinted
(``INCRECRAWL_MAIN_CONTENT = False``: how this project took a page's text before).

A change reported for a page with no edit since its last report is false, unless
the page is an added page's previous/next neighbour or one of Hugo's listings (a
new post is a real change of theirs). Then the content work's cost per page: main
content and conversion, beside the fingerprint alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section

DAY = 86400.0


def crawl(
    site_url: str, db: Path, feed: Path, shift: float, whole: bool, *extra: str
) -> list[dict]:
    """One crawl's items; *extra*: more ``NAME=value`` settings."""
    from tests.support.process import crawl_command, crawl_env

    feed.unlink(missing_ok=True)
    command = crawl_command(
        f"{site_url}/sitemap.xml",
        db,
        "INCRECRAWL_FETCHER=direct",
        "INCRECRAWL_CLOCK=increcrawl_scrapy.testing.clock.shifted_time",
        f"INCRECRAWL_MAIN_CONTENT={whole is False}",
        "LOG_LEVEL=WARNING",
        "TELNETCONSOLE_ENABLED=False",
        *extra,
        feed=feed,
    )
    env = crawl_env(None, INCRECRAWL_TIME_SHIFT=str(shift))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    if not feed.exists():
        return []
    return [json.loads(line) for line in feed.read_text().splitlines() if line.strip()]


def page_requests(access: Path, offset: int) -> tuple[int, int]:
    """Requests for pages (not assets, sitemaps, robots) since *offset* lines."""
    lines = access.read_text().splitlines()
    pages = [
        line
        for line in lines[offset:]
        if " /sitemap" not in line and " /robots.txt" not in line and ".css" not in line
    ]
    return len(pages), len(lines)


def story(
    generator: str,
    days: int,
    pages: int,
    growing: bool,
    whole: bool,
    seed: int,
    own: bool = False,
    dates: bool = True,
) -> dict:
    from tests.support.generators import DocSite
    from tests.support.nginx import free_port, nginx

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        site = DocSite(generator, root / "site", base, pages=pages, own_sitemap=own, dates=dates)
        site.build()
        pending: dict[str, int] = {}  # page URL -> the day of its oldest edit not reported
        allowed: set[str] = set()  # neighbours of added pages, not reported since
        caught_same_day = caught = edits = false = neighbour = 0
        per_day: list[int] = []
        false_urls: list[str] = []
        with nginx(site.out, root / "nginx", port=port) as (_url, access):
            offset = 0
            for day in range(days):
                if day:
                    site.advance(1)
                    if growing and day % 7 == 0:
                        added = site.add_page()
                        order = sorted(site.pages)
                        at = order.index(added)
                        allowed |= {site.url_of(s) for s in order[max(at - 1, 0) : at + 2]}
                        allowed |= site.listings()
                    for slug in rng.sample(sorted(site.pages), 2):
                        site.edit_page(slug)
                        pending.setdefault(site.url_of(slug), day)
                        edits += 1
                    site.build()
                items = crawl(site.base_url, root / "s.sqlite", root / "f.jsonl", day * DAY, whole)
                count, offset_now = page_requests(access, offset)
                offset = offset_now
                per_day.append(count)
                for item in items:
                    url, change = item["url"], item.get("change")
                    if change != "changed" or day == 0:
                        continue
                    if url in pending:
                        caught += 1
                        caught_same_day += pending.pop(url) == day
                    elif url in allowed or url in site.listings():
                        neighbour += 1
                        allowed.discard(url)
                    else:
                        false += 1
                        false_urls.append(url)
        last_week = per_day[-7:]
        return {
            "generator": generator
            + (" (its own sitemap)" if own else "")
            + ("" if dates else " (no dates)"),
            "growing": growing,
            "whole": whole,
            "pages": len(site.pages),
            "false": false,
            "neighbour": neighbour,
            "edits": edits,
            "caught": caught,
            "same_day": caught_same_day,
            "last_week_per_day": sum(last_week) / len(last_week),
            "total": sum(per_day),
            "per_day": per_day,
            "even": even_work(per_day),
            "false_urls": sorted(set(false_urls))[:5],
        }


def even_work(per_day: list[int], after: int = 7) -> tuple[int, float]:
    """The busiest day's requests after day *after* and the median day's then (#52:
    daily runs do similar work once the first week's learning is done; limit 1.5x)."""
    later = per_day[after + 1 :]
    return (max(later), statistics.median(later)) if later else (0, 0.0)


def content_cost(generator: str, pages: int) -> dict:
    """CPU per page: the main content and its markdown, and the fingerprint alone."""
    from increcrawl_scrapy.content.fingerprint import content_fingerprint
    from increcrawl_scrapy.content.page_text import ContentOptions, page_text
    from tests.support.generators import DocSite

    with tempfile.TemporaryDirectory() as work:
        site = DocSite(generator, Path(work), "http://127.0.0.1:1", pages=pages)
        site.build()
        bodies = []
        for slug in site.pages:
            path = site.out / (f"{slug}.html" if generator == "sphinx" else f"{slug}/index.html")
            bodies.append(path.read_bytes())
        timings = {}
        for name, options in (("main", ContentOptions()), ("whole", ContentOptions(False))):
            started = time.process_time()
            texts = [page_text(b, "text/html", b.decode(), options) for b in bodies]
            timings[name] = (time.process_time() - started) / len(bodies) * 1000
            started = time.process_time()
            for found in texts:
                content_fingerprint(found.text)
            timings[f"{name}_fingerprint"] = (time.process_time() - started) / len(bodies) * 1000
        return {"generator": generator, **timings}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--generators", default="mkdocs,sphinx,hugo")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--main-only", action="store_true", help="leave out the whole-page stories")
    parser.add_argument(
        "--no-dates", action="store_true", help="sitemaps without <lastmod> (WordPress < 6.5)"
    )
    parser.add_argument("--mkdocs-own-sitemap", action="store_true", help="MkDocs's sitemap too")
    args = parser.parse_args()
    generators = args.generators.split(",")
    rows = []
    stories = [(g, False) for g in generators]
    if args.mkdocs_own_sitemap:
        stories.append(("mkdocs", True))
    for generator, own in stories:
        for growing, whole in ((True, False), (False, False), (True, True)):
            if whole and args.main_only:
                continue
            result = story(
                generator,
                args.days,
                args.pages,
                growing,
                whole,
                seed=7,
                own=own,
                dates=not args.no_dates,
            )
            print(json.dumps(result), flush=True)
            rows.append(result)
    generators = list(dict.fromkeys(r["generator"] for r in rows))
    by = {(r["generator"], r["growing"], r["whole"]): r for r in rows}
    lines = []
    for generator in generators:
        flat = by[(generator, False, False)]["last_week_per_day"]
        for growing, whole in ((True, True), (True, False), (False, False)):
            if (generator, growing, whole) not in by:
                continue
            r = by[(generator, growing, whole)]
            busiest, median = r["even"]
            ratio = r["last_week_per_day"] / flat if flat else float("nan")
            lines.append(
                [
                    generator,
                    "whole page (before)" if whole else "main content",
                    "growing" if growing else "not growing",
                    str(r["false"]),
                    str(r["neighbour"]),
                    f"{r['same_day']}/{r['edits']}",
                    f"{r['caught']}/{r['edits']}",
                    f"{r['last_week_per_day']:.1f} ({ratio:.2f}x)",
                    f"{r['total'] / (r['pages'] * args.days):.2f}",
                    f"{busiest} / {median:g} ({busiest / median if median else 0:.2f}x)",
                ]
            )
    requests_table = table(
        [
            "site",
            "text fingerprinted",
            "growth",
            "false changes",
            "neighbours",
            "edits caught same day",
            "caught at all",
            "requests/day, last week (vs not growing)",
            "requests per page and day, 30 days (1.0: a daily full crawl)",
            "after day 7: busiest day / median day (limit 1.5x)",
        ],
        lines,
    )
    costs = [content_cost(generator, args.pages) for generator in args.generators.split(",")]
    cost_table = table(
        [
            "site",
            "main content + markdown",
            "its fingerprint",
            "whole page markdown",
            "its fingerprint",
        ],
        [
            [
                c["generator"],
                f"{c['main']:.2f} ms",
                f"{c['main_fingerprint']:.2f} ms",
                f"{c['whole']:.2f} ms",
                f"{c['whole_fingerprint']:.2f} ms",
            ]
            for c in costs
        ],
    )
    print(requests_table)
    print(cost_table)
    counts = Counter(r["false"] for r in rows if not r["whole"])
    print("false changes with main content:", dict(counts))
    if not args.no_write:
        write_section(
            "Real sites: a page's own content",
            f"{args.days} simulated days, {args.pages} pages to start with, 2 real edits a "
            "day, a page added each week where growing; direct fetches, nginx.\n\n"
            f"{requests_table}\n\nCPU per page (this machine):\n\n{cost_table}\n",
        )


if __name__ == "__main__":
    main()
