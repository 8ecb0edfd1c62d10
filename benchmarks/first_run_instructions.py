"""Instructions a first run executes, by thread, under valgrind (callgrind): a count the
machine's load does not move, where pages/s on a shared machine swing by half.

    python benchmarks/first_run_instructions.py [--pages 100,310] [--also CHECKOUT]

The site of ``content_throughput.py`` (pages marking their ``<main>``) crawled at two
sizes by SitemapSpider given ``CONCURRENT_ITEMS=8`` and by ``scrapy crawl incremental``
(direct), each under ``valgrind --tool=callgrind --separate-threads=yes``; per thread,
the instructions a page costs (the slope between the two sizes) and those of the start
(the line's value at no page). Slow: a 310-page crawl takes about 1.5 minutes.
Threads are numbered as they start: 1 is the reactor's; ours start the content thread
and Twisted's pool (DNS, state reads) later.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.content_throughput import _SETTINGS, _SPIDER, write_site

_VALGRIND = [
    "valgrind",
    "--tool=callgrind",
    "--separate-threads=yes",
    "--cache-sim=no",
    "--branch-sim=no",
]


def counts(command: list[str], cwd: Path, env: dict[str, str], out: Path) -> dict[int, int]:
    """Instructions of each thread of *command* (thread number -> count)."""
    out.parent.mkdir(exist_ok=True)
    done = subprocess.run(
        [*_VALGRIND, f"--callgrind-out-file={out}", *command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    found = {}
    for part in out.parent.glob(f"{out.name}-*"):
        summary = re.search(r"^summary: (\d+)", part.read_text(), re.MULTILINE)
        found[int(part.name.rsplit("-", 1)[1])] = int(summary.group(1)) if summary else 0
    return found


def main() -> None:
    from tests.support.nginx import nginx
    from tests.support.process import crawl_command, crawl_env

    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", default="100,310")
    parser.add_argument("--also", type=Path, help="another checkout's crawl, one more row")
    args = parser.parse_args()
    small, large = (int(n) for n in args.pages.split(","))
    here = Path(__file__).resolve().parent.parent
    trees = {"scrapy crawl incremental": here}
    if args.also is not None:
        trees[f"the same, the package at {args.also}"] = args.also
    measured: dict[str, dict[int, dict[int, int]]] = {}
    for pages in (small, large):
        with tempfile.TemporaryDirectory() as work:
            root = Path(work)
            www = root / "www"
            www.mkdir()
            (root / "plain.py").write_text(_SPIDER)
            with nginx(www, root / "nginx") as (url, _access):
                write_site(www, url, pages, "main")
                sitemap = f"{url}/sitemap.xml"
                env = crawl_env(None)
                plain_env = {k: v for k, v in env.items() if k != "SCRAPY_SETTINGS_MODULE"}
                plain = [sys.executable, "-m", "scrapy", "runspider", str(root / "plain.py")]
                plain += ["-a", f"sitemap_url={sitemap}", "-o", str(root / "plain.jsonl")]
                plain += [*_SETTINGS, "-s", "CONCURRENT_ITEMS=8"]
                name = "SitemapSpider, CONCURRENT_ITEMS=8"
                found = counts(plain, root, plain_env, root / "cg" / "plain")
                measured.setdefault(name, {})[pages] = found
                for n, (name, tree) in enumerate(trees.items()):
                    ours = crawl_command(
                        sitemap,
                        root / f"s{n}.sqlite",
                        "INCRECRAWL_FETCHER=direct",
                        *(pair for pair in _SETTINGS if pair != "-s"),
                        feed=root / f"ours{n}.jsonl",
                    )
                    other = {**env, "PYTHONPATH": str(tree)}
                    found = counts(ours, tree, other, root / "cg" / f"ours{n}")
                    measured.setdefault(name, {})[pages] = found
    print(f"| crawl | thread | at the start (G) | a page (M) | at {large} pages (G) |")
    print("|---|---|---|---|---|")
    for name, sizes in measured.items():
        for thread in sorted(set(sizes[small]) | set(sizes[large])):
            a, b = sizes[small].get(thread, 0), sizes[large].get(thread, 0)
            if b < 10**7:  # a thread of a few instructions (a timer's): not shown
                continue
            per_page = (b - a) / (large - small)
            start = a - per_page * small
            print(
                f"| {name} | {thread} | {start / 1e9:.2f} | {per_page / 1e6:.2f} | {b / 1e9:.2f} |"
            )


if __name__ == "__main__":
    main()
