"""Every way a run fails reaches cron: an exit code (``close_reasons.py``), and the
reason logged at ERROR before the process exits, so it is in ``LOG_FILE`` as well as
on stderr. Each case through a real ``scrapy crawl`` process."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from increcrawl_scrapy import stats
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.support.process import crawl_command, crawl_env, run_process

KEY = "cron-key-0123456789"

HOLD = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
if sys.argv[2] == "exclusive":
    db.execute("PRAGMA locking_mode=EXCLUSIVE")
    db.execute("BEGIN EXCLUSIVE")
else:
    db.execute("BEGIN IMMEDIATE")
db.execute("CREATE TABLE IF NOT EXISTS holder (x)")
print("held", flush=True)
time.sleep(120)
"""


@contextlib.contextmanager
def held(db: Path, how: str) -> Iterator[None]:
    """*db* held by another program (an sqlite3 shell, say) while the block runs."""
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db), how], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            yield
        finally:
            holder.kill()


def crawl(db: Path, sitemap: str, *settings: str, key: str | None = None, args=()):
    command = crawl_command(sitemap, db, *settings)
    for arg in args:
        command += ["-a", arg]
    return run_process(command, db.parent, key)


def errors_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if " ERROR: " in line]


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port that refuses connections: bound and not listening while the block runs, so
    that no server another test (or pytest-xdist worker) starts can take it meanwhile."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        yield probe.getsockname()[1]


@pytest.mark.parametrize("how", ["write", "exclusive"])
def test_a_database_another_program_holds_exits_75_with_the_reason_logged(
    tmp_path: Path, how: str
) -> None:
    db = tmp_path / "s.sqlite"
    log = tmp_path / "crawl.log"
    with SampleSite(pages=3) as site:
        first = crawl(db, site.sitemap_url, "INCRECRAWL_FETCHER=direct")
        assert first.returncode == 0, first.stderr[-2000:]
        with held(db, how):
            started = time.monotonic()
            done = crawl(
                db,
                site.sitemap_url,
                "INCRECRAWL_FETCHER=direct",
                "INCRECRAWL_DB_LOCK_TIMEOUT=1",
                f"LOG_FILE={log}",
            )
            took = time.monotonic() - started
    assert done.returncode == 75, done.stderr[-2000:]
    # It gave up after its 1 s, not when the holder let go (120 s): a bound on a hang,
    # not a speed.
    assert took < 60
    logged = errors_in(log.read_text())
    assert len(logged) == 1 and "in use" in logged[0], log.read_text()[-2000:]
    # The log goes to a file: cron's mail (stderr) gets the reason too, once.
    assert done.stderr.count("in use") == 1, done.stderr
    assert "Spider opened" not in log.read_text()


def test_a_database_in_use_says_so_on_stderr_with_nolog(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=2) as site:
        assert crawl(db, site.sitemap_url, "INCRECRAWL_FETCHER=direct").returncode == 0
        with held(db, "write"):
            command = crawl_command(
                site.sitemap_url, db, "INCRECRAWL_FETCHER=direct", "INCRECRAWL_DB_LOCK_TIMEOUT=1"
            )
            done = run_process([*command, "--nolog"], tmp_path)
    assert done.returncode == 75
    assert "Try later" in done.stderr and "in use" in done.stderr


# 30 pages: one by one, or a batch. Without GEONODE_CONCURRENCY the first call reads
# the plan's (GET /v1/usage/concurrency), before any page: the batch size plays no part.
@pytest.mark.parametrize(("concurrency", "batch"), [(None, "50"), ("4", "50"), ("4", "2")])
def test_an_api_refusing_connections_at_start_exits_5_without_retrying(
    tmp_path: Path, concurrency: str | None, batch: str
) -> None:
    log = tmp_path / "crawl.log"
    with refused_port() as port, SampleSite(pages=30) as site:
        settings = [f"GEONODE_API_URL=http://127.0.0.1:{port}", f"GEONODE_BATCH_MIN_URLS={batch}"]
        if concurrency:
            settings.append(f"GEONODE_CONCURRENCY={concurrency}")
        done = crawl(tmp_path / "s.sqlite", site.sitemap_url, *settings, f"LOG_FILE={log}", key=KEY)
    text = log.read_text()
    assert done.returncode == 5, text[-3000:]
    # At the first refused calls, none retried (each retry waits its back-off first).
    assert f"'{stats.API_RETRIES}'" not in text, text[-3000:]
    assert "'finish_reason': 'geonode_unreachable'" in text
    reasons = [line for line in errors_in(text) if "Geonode API" in line]
    assert reasons and "refused" in reasons[0].lower(), errors_in(text)
    assert "Run summary for" in text
    with sqlite3.connect(tmp_path / "s.sqlite") as db:  # the run is recorded, nothing fetched
        assert db.execute("SELECT close_reason FROM runs").fetchall() == [("geonode_unreachable",)]
        assert db.execute("SELECT count(last_fetched) FROM pages").fetchone() == (0,)


#: The resolver of the crawl's process fails for .invalid names, as getaddrinfo does
#: for a misspelled host (no DNS server is ever asked: tests stay on 127.0.0.1).
NO_DNS = """
import socket
_real = socket.getaddrinfo
def getaddrinfo(host, *args, **kwargs):
    if str(host).endswith(".invalid"):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return _real(host, *args, **kwargs)
socket.getaddrinfo = getaddrinfo
"""


def test_an_api_host_that_does_not_resolve_exits_5_without_retrying(tmp_path: Path) -> None:
    (tmp_path / "patch").mkdir()
    (tmp_path / "patch" / "sitecustomize.py").write_text(NO_DNS)
    command = crawl_command(
        "", tmp_path / "s.sqlite", "GEONODE_API_URL=http://geonode.invalid", "GEONODE_CONCURRENCY=2"
    )
    with SampleSite(pages=10) as site:
        command[command.index("sitemap_url=")] = f"sitemap_url={site.sitemap_url}"
        done = subprocess.run(
            command,
            env=crawl_env(KEY, PYTHONPATH=str(tmp_path / "patch")),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 5, done.stderr[-3000:]
    # At the first calls that did not resolve, none retried.
    assert f"'{stats.API_RETRIES}'" not in done.stderr, done.stderr[-3000:]
    reasons = [line for line in errors_in(done.stderr) if "cannot be reached" in line]
    assert reasons and "geonode.invalid" in reasons[0], errors_in(done.stderr)


def test_an_api_that_goes_down_during_a_batch_run_exits_5(tmp_path: Path) -> None:
    with SampleSite(pages=40) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        api.inject("503", count=10_000, endpoint="batch")
        done = crawl(
            tmp_path / "s.sqlite",
            site.sitemap_url,
            f"GEONODE_API_URL={api.url}",
            "GEONODE_BATCH_MIN_URLS=2",
            "GEONODE_BACKOFF_BASE=0.01",
            "GEONODE_BACKOFF_MAX=0.1",
            key=KEY,
        )
    assert done.returncode == 5, done.stderr[-3000:]
    assert "'finish_reason': 'geonode_unreachable'" in done.stderr
    assert errors_in(done.stderr)


def test_a_run_whose_every_page_failed_exits_6(tmp_path: Path) -> None:
    with SampleSite(pages=3) as site:
        for page in range(3):
            site.fail(page, 500)
        done = crawl(
            tmp_path / "s.sqlite", site.sitemap_url, "INCRECRAWL_FETCHER=direct", "RETRY_TIMES=0"
        )
    assert done.returncode == 6, done.stderr[-2000:]
    assert "'finish_reason': 'too_many_errors'" in done.stderr
    assert any("every one of the 3 fetches failed" in line for line in errors_in(done.stderr))


def test_a_bad_argument_is_logged_when_the_log_goes_to_a_file(tmp_path: Path) -> None:
    log = tmp_path / "crawl.log"
    done = crawl(tmp_path / "s.sqlite", "not a url", "INCRECRAWL_FETCHER=direct", f"LOG_FILE={log}")
    assert done.returncode == 2
    assert "-a sitemap_url: not a URL to crawl" in done.stderr
    logged = errors_in(log.read_text())
    assert len(logged) == 1 and "-a sitemap_url: not a URL to crawl" in logged[0]


def test_an_unknown_argument_is_named(tmp_path: Path) -> None:
    with SampleSite(pages=2) as site:
        done = crawl(
            tmp_path / "s.sqlite",
            site.sitemap_url,
            "INCRECRAWL_FETCHER=direct",
            args=("max_pages=3", "sede=x"),
        )
    assert done.returncode == 0, done.stderr[-2000:]
    warned = [line for line in done.stderr.splitlines() if "WARNING" in line and "argument" in line]
    assert any("max_pages" in line for line in warned), warned
    assert any("sede" in line and "did you mean seed" in line for line in warned), warned
    summary = done.stderr[done.stderr.index("Run summary for") :]
    assert "max_pages" in summary  # repeated where an operator looks


@pytest.mark.parametrize("value", ["maybe", "2", ""])
def test_a_boolean_argument_is_parsed_strictly(tmp_path: Path, value: str) -> None:
    done = crawl(
        tmp_path / "s.sqlite",
        "http://127.0.0.1:9/sitemap.xml",
        "INCRECRAWL_FETCHER=direct",
        args=(f"discover_only={value}",),
    )
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if "error: " in line]
    assert len(errors) == 1 and "-a discover_only" in errors[0], done.stderr
    assert "Spider opened" not in done.stderr


@pytest.mark.parametrize("value", ["true", "0", "No"])
def test_boolean_arguments_in_their_usual_spellings_are_accepted(
    tmp_path: Path, value: str
) -> None:
    with SampleSite(pages=2) as site:
        done = crawl(
            tmp_path / "s.sqlite",
            site.sitemap_url,
            "INCRECRAWL_FETCHER=direct",
            args=(f"discover_only={value}", f"increcrawl_reset={value}"),
        )
    assert done.returncode == 0, done.stderr[-2000:]
    fetched = "0 fetched" if value == "true" else "2 fetched"
    assert fetched in done.stderr


def test_a_database_another_program_takes_mid_run_exits_75(tmp_path: Path) -> None:
    """The lock taken while the crawl runs (an sqlite3 shell's transaction left
    open): the crawl stops with database_in_use, says why at ERROR, exits 75, and
    the next run, the database free again, fetches what was not recorded."""
    db = tmp_path / "s.sqlite"
    log = tmp_path / "crawl.log"
    slow = ("INCRECRAWL_FETCHER=direct", "CONCURRENT_REQUESTS=1", "DOWNLOAD_DELAY=0.05")
    with SampleSite(pages=200) as site:
        command = crawl_command(
            site.sitemap_url, db, *slow, "INCRECRAWL_DB_LOCK_TIMEOUT=1", f"LOG_FILE={log}"
        )
        with subprocess.Popen(
            command, cwd=tmp_path, env=crawl_env(None), stderr=subprocess.PIPE, text=True
        ) as crawling:
            deadline = time.monotonic() + 60
            while sum(site.fetched.values()) < 40 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert crawling.poll() is None, "the crawl ended before the lock was taken"
            with held(db, "write"):
                _, stderr = crawling.communicate(timeout=60)
        assert crawling.returncode == 75, stderr[-3000:]
        logged = errors_in(log.read_text())
        assert any("in use" in line for line in logged), log.read_text()[-3000:]
        assert "Traceback" not in log.read_text(), log.read_text()[-5000:]
        fetched_before = sum(site.fetched.values())
        assert fetched_before < 200
        again = crawl(db, site.sitemap_url, "INCRECRAWL_FETCHER=direct")
        assert again.returncode == 0, again.stderr[-2000:]
    rows = sqlite3.connect(db).execute("SELECT count(*) FROM pages WHERE fetch_count > 0")
    assert rows.fetchone()[0] >= 200  # every page recorded once the database was free
