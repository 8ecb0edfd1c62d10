"""Deploy the project to a real Scrapyd and run ``incremental`` there, twice."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
from filelock import FileLock

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.servers import REPO, scrapyd

pytestmark = pytest.mark.e2e

KEY = "scrapyd-secret-key-42"
PROJECT = "increcrawl_scrapy"
#: Bounds on a hang, not on speed: on a busy machine scrapyd-deploy alone took 50 s
#: and Scrapyd's answers over 10 s (a test fails only when Scrapyd is stuck).
ANSWER = 120
JOB = 600


def deploy(url: str) -> None:
    # scrapyd-deploy builds its egg in the clone (build/, the egg-info): one deploy at a
    # time, whichever pytest-xdist worker asks.
    clone = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    with FileLock(Path(tempfile.gettempdir()) / f"scrapyd-deploy-{clone}.lock"):
        _deploy(url)


def _deploy(url: str) -> None:
    done = subprocess.run(
        [str(Path(sys.executable).parent / "scrapyd-deploy"), "scrapyd", "-v", "r1"],
        cwd=REPO,
        env={**os.environ, "SCRAPYD_URL": url},
        capture_output=True,
        text=True,
        timeout=JOB,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"status": "ok"' in done.stdout + done.stderr


def schedule_and_wait(url: str, **args: str) -> str:
    settings = args.pop("settings")
    data = [("project", PROJECT), ("spider", "incremental"), *args.items()]
    data += [("setting", f"{k}={v}") for k, v in settings.items()]
    answer = requests.post(url + "schedule.json", data=data, timeout=ANSWER).json()
    assert answer["status"] == "ok", answer
    job = answer["jobid"]
    deadline = time.monotonic() + JOB
    while time.monotonic() < deadline:
        jobs = requests.get(
            url + "listjobs.json", params={"project": PROJECT}, timeout=ANSWER
        ).json()
        if any(j["id"] == job for j in jobs["finished"]):
            return job
        time.sleep(0.3)
    raise AssertionError(f"job {job} did not finish: {jobs}")


def items_of(workdir: Path, job: str) -> list[dict]:
    path = workdir / "items" / PROJECT / "incremental" / f"{job}.jl"
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def log_of(workdir: Path, job: str) -> str:
    return (workdir / "logs" / PROJECT / "incremental" / f"{job}.log").read_text()


def test_deploy_and_run_on_scrapyd(tmp_path: Path) -> None:
    db = tmp_path / "state" / "crawl.sqlite"
    db.parent.mkdir()
    with SampleSite(pages=12) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        workdir = tmp_path / "scrapyd"
        with scrapyd(workdir, {"GEONODE_API_KEY": KEY}) as url:
            deploy(url)
            spiders = requests.get(
                url + "listspiders.json", params={"project": PROJECT}, timeout=ANSWER
            )
            assert spiders.json()["spiders"] == ["incremental"]
            settings = {"INCRECRAWL_DB": str(db), "GEONODE_API_URL": api.url, "LOG_LEVEL": "DEBUG"}

            first = schedule_and_wait(url, sitemap_url=site.sitemap_url, settings=settings)
            items = items_of(workdir, first)
            assert {i["url"] for i in items} == set(site.page_urls())
            assert {i["change"] for i in items} == {"new"}
            assert api.counters()["requests"]["POST /v1/extract"] == 12
            rows = (
                sqlite3.connect(db)
                .execute("SELECT count(*), count(content_hash) FROM pages")
                .fetchone()
            )
            assert rows == (12, 12)
            log = log_of(workdir, first)
            assert "Fetching pages through the Geonode API" in log
            assert KEY not in log and KEY not in json.dumps(items)

            site.edit(1)  # both have a sitemap lastmod, so they are due at once
            site.edit(2)
            second = schedule_and_wait(url, sitemap_url=site.sitemap_url, settings=settings)
            changed = items_of(workdir, second)
            assert {(i["url"], i["change"]) for i in changed} == {
                (site.page_url(1), "changed"),
                (site.page_url(2), "changed"),
            }
            assert KEY not in log_of(workdir, second)

            # A relative database path resolves against Scrapyd's directory: warned.
            relative = {**settings, "INCRECRAWL_DB": "relative-state.sqlite"}
            third = schedule_and_wait(url, sitemap_url=site.sitemap_url, settings=relative)
            warning = next(
                line for line in log_of(workdir, third).splitlines() if "relative-state" in line
            )
            assert "WARNING" in warning and "under Scrapyd" in warning
            assert (workdir / "relative-state.sqlite").exists()
        assert KEY.encode() not in db.read_bytes()


def test_a_failing_job_leaves_its_reason_in_the_job_log(tmp_path: Path) -> None:
    """Scrapyd keeps the job's log, not its stderr: each reason a job stops for is
    logged at ERROR there (a bad argument, a database another program holds)."""
    from tests.runs.test_cron_failures import held

    db = tmp_path / "state" / "crawl.sqlite"
    db.parent.mkdir()
    with SampleSite(pages=3) as site:
        workdir = tmp_path / "scrapyd"
        with scrapyd(workdir, {}) as url:
            deploy(url)
            settings = {"INCRECRAWL_DB": str(db), "INCRECRAWL_FETCHER": "direct"}
            bad = schedule_and_wait(url, sitemap_url="not a url", settings=settings)
            errors = [line for line in log_of(workdir, bad).splitlines() if " ERROR: " in line]
            assert any("-a sitemap_url: not a URL to crawl" in line for line in errors), errors

            flag = schedule_and_wait(
                url, sitemap_url=site.sitemap_url, discover_only="maybe", settings=settings
            )
            errors = [line for line in log_of(workdir, flag).splitlines() if " ERROR: " in line]
            assert any("-a discover_only" in line for line in errors), errors

            first = schedule_and_wait(url, sitemap_url=site.sitemap_url, settings=settings)
            assert "ended finished (exit code 0" in log_of(workdir, first)
            with held(db, "write"):
                locked = schedule_and_wait(
                    url,
                    sitemap_url=site.sitemap_url,
                    settings={**settings, "INCRECRAWL_DB_LOCK_TIMEOUT": "1"},
                )
            log = log_of(workdir, locked)
            errors = [line for line in log.splitlines() if " ERROR: " in line]
            assert len(errors) == 1 and "Try later" in errors[0] and "in use" in errors[0], log
