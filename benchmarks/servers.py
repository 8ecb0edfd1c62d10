"""Run the sample site and the stand-in API in a process of their own, so their CPU
work does not compete with the crawl being measured for the same interpreter lock.

    python benchmarks/servers.py PAGES   # prints {"site": URL, "api": URL}, serves until killed
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

KEY = "bench-key-not-secret"


@contextlib.contextmanager
def servers(pages: int, children: int = 2) -> Iterator[dict[str, str]]:
    process = subprocess.Popen(
        [sys.executable, __file__, str(pages), str(children)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        yield json.loads(process.stdout.readline())
    finally:
        process.terminate()
        process.wait(timeout=30)


def main() -> None:
    from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite

    site = SampleSite(pages=int(sys.argv[1]), children=int(sys.argv[2])).start()
    api = GeonodeStandIn(api_keys=[KEY], concurrency_limit=1000).start()
    print(json.dumps({"site": site.url, "api": api.url, "sitemap": site.sitemap_url}), flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
