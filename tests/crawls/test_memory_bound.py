"""A first run over a large site holds about one chunk of the due queue, not the
whole due set: peak memory of the crawl process stays bounded (not a timing test:
a generous bound on the peak RSS of a real ``scrapy crawl``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from increcrawl_scrapy.testing import SampleSite
from tests.support.process import crawl_command, crawl_env

PAGES = 200_000
#: Before the queue was streamed this crawl peaked at 630 MB (200,000 requests in
#: Scrapy's scheduler, every due row in memory); now about 150 MB, as a first run
#: over 10,000,000 pages does (benchmarks/first_run.py).
BOUND_MB = 300


def test_a_first_run_over_200k_pages_stays_under_the_bound(tmp_path: Path) -> None:
    with SampleSite(pages=PAGES, children=4) as site:
        command = crawl_command(
            site.sitemap_url,
            tmp_path / "state.sqlite",
            "INCRECRAWL_FETCHER=direct",
            "CLOSESPIDER_ITEMCOUNT=300",  # discovery whole, then the first fetches
            "TELNETCONSOLE_ENABLED=False",
            "LOG_LEVEL=INFO",
        )
        # Through a fresh process whose only child is the crawl: its children's
        # peak RSS is the crawl's own.
        measure = (
            "import resource, subprocess, sys, json\n"
            "done = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)\n"
            "sys.stderr.write(done.stderr)\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(done.returncode)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", measure, json.dumps(command)],
            env=crawl_env(None),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        peak_mb = int(done.stdout.split()[-1]) / 1024 if done.stdout.strip() else 0
    assert done.returncode == 0, done.stderr[-3000:]
    assert "'increcrawl/discovered': 200000" in done.stderr
    enqueued = int(re.search(r"'scheduler/enqueued': (\d+)", done.stderr).group(1))
    assert enqueued <= 10_000  # one chunk of the queue, not the due set
    assert 0 < peak_mb < BOUND_MB, peak_mb
