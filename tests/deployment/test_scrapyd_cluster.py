"""Several real Scrapyd nodes, the egg deployed to each, scheduled on the same seed
over one PostgreSQL state: the pages are shared out, none is fetched twice, and one
node reads the sitemaps at a time."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
import requests

from increcrawl_scrapy.testing import SampleSite
from tests.deployment.test_scrapyd import ANSWER, JOB, PROJECT, deploy, log_of
from tests.servers import scrapyd

pytestmark = pytest.mark.e2e

NODES = 3
PAGES = 400


def schedule(url: str, sitemap: str, settings: dict[str, str]) -> str:
    data = [("project", PROJECT), ("spider", "incremental"), ("sitemap_url", sitemap)]
    data += [("setting", f"{k}={v}") for k, v in settings.items()]
    answer = requests.post(url + "schedule.json", data=data, timeout=ANSWER).json()
    assert answer["status"] == "ok", answer
    return answer["jobid"]


def wait_all(jobs: list[tuple[str, str]]) -> None:
    deadline = time.monotonic() + JOB
    waiting = list(jobs)
    while waiting and time.monotonic() < deadline:
        url, job = waiting[0]
        listed = requests.get(url + "listjobs.json", params={"project": PROJECT}, timeout=ANSWER)
        if any(j["id"] == job for j in listed.json()["finished"]):
            waiting.pop(0)
        else:
            time.sleep(0.3)
    assert not waiting, f"jobs still running: {waiting}"


def stat(log: str, key: str) -> int:
    found = re.search(rf"'{re.escape(key)}': (\d+)", log)
    return int(found.group(1)) if found else 0


def test_three_scrapyd_nodes_share_one_seed_on_postgresql(
    tmp_path: Path, postgres_dsn: str
) -> None:
    import psycopg

    settings = {
        "INCRECRAWL_DB": postgres_dsn,
        "INCRECRAWL_FETCHER": "direct",
        "DOWNLOAD_DELAY": "0.02",  # long enough for the three jobs to overlap
        "CONCURRENT_REQUESTS_PER_DOMAIN": "2",
        "TELNETCONSOLE_ENABLED": "False",
    }
    with SampleSite(pages=PAGES, children=4) as site:
        nodes = []
        with _nodes(tmp_path) as urls:
            for url in urls:
                deploy(url)
            # The first run, on one node: discovery and every page.
            first = urls[0], schedule(urls[0], site.sitemap_url, settings)
            wait_all([first])
            assert site.fetched and max(site.fetched.values()) == 1
            # Every page due again (an operator's `due --all`), then all nodes at once.
            with psycopg.connect(postgres_dsn, autocommit=True) as connection:
                connection.execute("UPDATE pages SET next_check = 0")
            site.reset_counters()
            jobs = [(url, schedule(url, site.sitemap_url, settings)) for url in urls]
            wait_all(jobs)
            logs = [log_of(tmp_path / f"node{i}", job) for i, (_url, job) in enumerate(jobs)]
            nodes = [stat(log, "increcrawl/unchanged") for log in logs]
            elsewhere = [stat(log, "increcrawl/discovery_by_another_worker") for log in logs]
    assert {path: n for path, n in site.fetched.items() if n != 1} == {}
    assert len(site.fetched) == PAGES
    assert sum(nodes) == PAGES and sum(1 for n in nodes if n) >= 2, nodes
    assert sum(elsewhere) <= NODES - 1  # at most one node read the sitemaps at a time
    assert all("Spider closed (finished)" in log for log in logs)


class _nodes:
    """NODES Scrapyd servers, each in its own directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.stack: list = []

    def __enter__(self) -> list[str]:
        urls = []
        for i in range(NODES):
            context = scrapyd(self.root / f"node{i}", {})
            urls.append(context.__enter__())
            self.stack.append(context)
        return urls

    def __exit__(self, *exc_info: object) -> None:
        for context in reversed(self.stack):
            context.__exit__(None, None, None)
