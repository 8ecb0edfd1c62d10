"""One huge page's content work, before and after the bound (#51, 6).

    python benchmarks/huge_page.py [--sizes 1,3,10] [--before-max 3]

A page of a plain repetitive table and no main element, SIZE MB, its text taken by
``page_text`` in a fresh process each: "extracted" with no limit (trafilatura's
extraction, as before ``INCRECRAWL_CONTENT_MAX_BYTES``), "cut" with the default limit
(the whole body less the template, linear). Wall time and the process's peak memory.
The extraction is measured only up to ``--before-max`` MB: it grows faster than the
page (over four minutes and 1.9 GB at 10 MB, issue #51).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import emit, peak_rss_mb, run_worker, table, write_section

NAME = "One huge page's content work"


def page(megabytes: float) -> str:
    """A table of rows of about 57 bytes, between a menu and a footer."""
    rows = int(megabytes * 1_000_000 / 57)
    cells = "".join(
        f"<tr><td>row {i}</td><td>value {i % 97}</td><td>item</td></tr>" for i in range(rows)
    )
    return (
        '<html><head><title>t</title></head><body><nav><a href="/">Home</a></nav>'
        f"<h1>All the data</h1><table>{cells}</table><footer>(c) 2026</footer></body></html>"
    )


def worker(megabytes: float, limit: int) -> None:
    from increcrawl_scrapy.content.page_text import ContentOptions, page_text

    html = page(megabytes)
    body = html.encode()
    page_text(
        b"<html><body><p>warm</p></body></html>", "text/html", "<p>warm</p>", ContentOptions()
    )
    base = peak_rss_mb()
    began = time.perf_counter()
    found = page_text(body, "text/html", html, ContentOptions(extract_max_bytes=limit))
    emit(
        {
            "how": found.how,
            "seconds": time.perf_counter() - began,
            "peak_mb": peak_rss_mb(),
            "base_mb": base,
            "bytes": len(body),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1,3,10")
    parser.add_argument("--before-max", type=float, default=3)
    parser.add_argument("--worker", nargs=2)
    args = parser.parse_args()
    if args.worker:
        worker(float(args.worker[0]), int(args.worker[1]))
        return
    from increcrawl_scrapy.content.page_text import DEFAULT_CONTENT_MAX_BYTES

    load = os.getloadavg()[0]  # a shared machine's load stretches both columns alike
    rows = []
    for size in (float(s) for s in args.sizes.split(",")):
        limits = [("after", DEFAULT_CONTENT_MAX_BYTES)]
        if size <= args.before_max:
            limits.insert(0, ("before", 10**12))
        for label, limit in limits:
            done = run_worker(__file__, str(size), str(limit))
            rows.append(
                [
                    f"{done['bytes'] / 1e6:.1f} MB",
                    label,
                    done["how"],
                    f"{done['seconds']:.2f} s",
                    f"{done['peak_mb']:.0f} MB",
                ]
            )
            print(rows[-1], flush=True)
    body = (
        "A page of a plain repetitive table, no main element, its text taken by "
        "`page_text` in a fresh process; before: no limit (trafilatura's extraction); "
        "after: the default `INCRECRAWL_CONTENT_MAX_BYTES` (1 MiB: the whole body less "
        f"the template). Load average at the start: {load:.1f}.\n\n"
        + table(["page", "", "taken", "time", "peak memory (process)"], rows)
    )
    write_section(NAME, body)


if __name__ == "__main__":
    main()
