"""``scrapy increcrawl status | due | forget`` on a real crawl's database, run as an
operator runs them: no SQL, clear messages, a crawl in progress never disturbed."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.commands.state import _status, _text
from increcrawl_scrapy.state import StateReader, StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.crawling import crawl_settings, run_crawl
from tests.support.process import crawl_command, run_process


def scrapy(db: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, db.parent)


def crawl(db: Path, site: SampleSite, feed: Path | None = None) -> subprocess.CompletedProcess:
    command = crawl_command(site.sitemap_url, db, "INCRECRAWL_FETCHER=direct", feed=feed)
    return run_process(command, db.parent)


def fetches(site: SampleSite, page: int) -> int:
    return site.fetched[f"/page/{page}"]


@pytest_twisted.async_yield_fixture
async def crawled(tmp_path: Path):
    """A real crawl's database and its site. The crawl runs in this process (a second
    costs seconds of CPU, and what these tests run as an operator would is the
    commands); the crawls the tests make next run as cron's do."""
    db = tmp_path / "s.sqlite"
    with SampleSite(pages=10) as site:
        first = await run_crawl(crawl_settings(str(db), time.time), sitemap_url=site.sitemap_url)
        assert first.reason == "finished" and len(first.items) == 10
        yield db, site


def test_status_shows_pages_runs_and_verdicts(crawled) -> None:
    db, site = crawled
    done = scrapy(db, "status")
    assert done.returncode == 0, done.stdout + done.stderr
    assert site.sitemap_url in done.stdout
    assert "pages 10: live 10, gone 0, missing 0" in done.stdout
    assert "due now 0" in done.stdout and "median interval 1 day\n" in done.stdout
    assert "run 1 " in done.stdout and "discovery complete" in done.stdout
    assert "fetched 10 of 10 listed pages (as many as fetching them all)" in done.stdout
    report = json.loads(scrapy(db, "status", "--json").stdout)
    (seed,) = report["seeds"]
    assert (seed["pages"], seed["live"], seed["due_now"]) == (10, 10, 0)
    assert seed["runs"][0]["new"] == 10
    assert (seed["runs"][0]["fetched"], seed["runs"][0]["listed"]) == (10, 10)


def test_status_opens_the_database_read_only(crawled) -> None:
    db, _site = crawled
    db.chmod(0o444)
    try:
        assert scrapy(db, "status").returncode == 0
    finally:
        db.chmod(0o644)


def test_due_makes_a_page_fetched_by_the_next_run(crawled) -> None:
    db, site = crawled
    done = scrapy(db, "due", site.page_url(3))
    assert done.returncode == 0 and "1 page made due now" in done.stdout
    before = fetches(site, 3)
    assert crawl(db, site).returncode == 0
    assert fetches(site, 3) == before + 1 and fetches(site, 4) == 1
    seed = site.sitemap_url
    assert "10 pages made due now" in scrapy(db, "due", "--seed", seed).stdout
    assert "10 pages made due now" in scrapy(db, "due", "--all").stdout


def test_forget_brings_a_listed_page_back_as_new(crawled, tmp_path: Path) -> None:
    db, site = crawled
    done = scrapy(db, "forget", site.page_url(2))
    assert done.returncode == 0 and "1 page forgotten" in done.stdout
    feed = tmp_path / "items.jsonl"
    assert crawl(db, site, feed).returncode == 0
    items = [json.loads(line) for line in feed.read_text().splitlines()]
    # its sitemap is read whole again though unchanged, and the page is new again
    assert [(i["url"], i["change"]) for i in items] == [(site.page_url(2), "new")]
    assert "10 pages forgotten" in scrapy(db, "forget", "--seed", site.sitemap_url).stdout
    count = sqlite3.connect(db).execute("SELECT count(*) FROM pages").fetchone()[0]
    assert count == 0


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (("due",), "needs one URL or --seed SEED or --all", 2),
        (("forget", "--all"), "needs one URL or --seed SEED", 2),
        (("due", "http://nowhere.example/x"), "No page http://nowhere.example/x", 1),
        (("forget", "--seed", "nope"), "No pages of seed 'nope'", 1),
        (("status", "--seed", "nope"), "No pages of seed 'nope'", 1),
    ],
)
def test_clear_messages_for_wrong_targets(crawled, args, message: str, code: int) -> None:
    db, _site = crawled
    done = scrapy(db, *args)
    assert done.returncode == code and message in done.stdout, done.stdout + done.stderr


def test_a_missing_database_is_named(tmp_path: Path) -> None:
    for command in (("status",), ("due", "--all")):
        done = scrapy(tmp_path / "absent.sqlite", *command)
        assert done.returncode == 1 and "No state database at" in done.stdout
        assert not (tmp_path / "absent.sqlite").exists()


def test_edits_wait_for_a_crawl_in_progress(crawled) -> None:
    from increcrawl_scrapy.state import StateStore

    db, _site = crawled
    with StateStore(db, exclusive=True):  # what a running crawl holds
        done = scrapy(db, "due", "--all")
        assert done.returncode == 75 and "Try later" in done.stdout
        assert scrapy(db, "status").returncode == 0  # reading never waits


@pytest.mark.parametrize("action", ["due", "forget"])
def test_edits_keep_the_keys_the_crawls_made(tmp_path: Path, action: str) -> None:
    # A state crawled with INCRECRAWL_STRIP_TRAILING_SLASH = False, edited from a
    # shell without that setting: the command takes the URL by the stored settings
    # and never re-keys the rows (which would merge /docs/ into /docs).
    from scrapy.settings import Settings

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.state import StateStore

    db = tmp_path / "s.sqlite"
    seed, slashed, plain = (
        "https://example.com/sitemap.xml",
        "https://example.com/docs/",
        "https://example.com/docs",
    )
    crawled = Settings({"INCRECRAWL_DB": str(db), "INCRECRAWL_STRIP_TRAILING_SLASH": False})
    with StateStore.from_config(IncrecrawlConfig.from_settings(crawled)) as store:
        store.start_run(seed).upsert([(slashed, None), (plain, None)])
        for url in (slashed, plain):
            store.record(url, 200, seed=seed, content_hash=url)
    settings = sqlite3.connect(db).execute("SELECT value FROM settings").fetchall()
    done = scrapy(db, action, slashed)
    assert done.returncode == 0, done.stdout + done.stderr
    connection = sqlite3.connect(db)
    rows = dict(connection.execute("SELECT normalized_url, next_check FROM pages"))
    if action == "due":
        assert set(rows) == {slashed, plain} and rows[slashed] == 0 and rows[plain] > 0
    else:
        assert set(rows) == {plain}
    assert connection.execute("SELECT value FROM settings").fetchall() == settings


def test_diff_finds_a_page_by_the_keys_the_crawls_made(tmp_path: Path) -> None:
    # As the edits: a state crawled with INCRECRAWL_STRIP_TRAILING_SLASH = False,
    # read from a shell without that setting.
    from scrapy.settings import Settings

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.state import StateStore

    db, seed = tmp_path / "s.sqlite", "https://example.com/sitemap.xml"
    slashed = "https://example.com/docs/"
    crawled = Settings({"INCRECRAWL_DB": str(db), "INCRECRAWL_STRIP_TRAILING_SLASH": False})
    with StateStore.from_config(IncrecrawlConfig.from_settings(crawled)) as store:
        store.start_run(seed).upsert([(slashed, None)])
        store.record(slashed, 200, seed=seed, content_hash="h", content="the docs")
    done = scrapy(db, "diff", slashed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has not changed since its text was first kept" in done.stdout


def test_diff_of_a_gone_page_says_it_is_gone(tmp_path: Path, clock) -> None:
    """Not "has not changed": what it last said, and that it is gone."""
    from increcrawl_scrapy.state import StateStore

    db, seed, url = (
        tmp_path / "s.sqlite",
        "https://example.com/sitemap.xml",
        "https://example.com/a",
    )
    with StateStore(db, clock=clock) as store:
        store.start_run(seed).upsert([(url, None)])
        store.record(url, 200, seed=seed, content_hash="h", content="the text\n")
        clock.advance(86_400)
        store.record(url, 404, seed=seed)
    assert StateStore(db).get(url).gone
    done = scrapy(db, "diff", url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "has not changed" not in done.stdout
    assert f"{url} is gone (HTTP 404 on " in done.stdout, done.stdout
    assert "-the text" in done.stdout.splitlines(), done.stdout


def test_a_run_that_rechecks_gone_pages_says_so_not_more_than_listed(crawled) -> None:
    """Deleted pages leave the sitemap, and are fetched once more to be sure they are
    gone: the run fetched more pages than are listed, which the summary says plainly."""
    db, site = crawled
    site.delete(4)
    site.delete(5)
    assert "pages made due now" in scrapy(db, "due", "--all").stdout
    assert crawl(db, site).returncode == 0
    done = scrapy(db, "status")
    assert "pages 10: live 8, gone 2" in done.stdout, done.stdout
    assert "fetched 10 pages, more than the 8 listed (pages no longer listed checked too)" in (
        done.stdout
    )


def test_a_page_that_left_the_sitemap_is_not_counted_as_listed(crawled) -> None:
    """A page no longer in the sitemap stays live (absence never makes a page gone) but
    is not listed: the summary's pages listed agree with the URLs discovered."""
    db, site = crawled
    site.drop_from_sitemap(4)
    done = crawl(db, site)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "discovered 9 URLs; 0 pages due" in done.stderr, done.stderr[-2000:]
    assert "fetched 0 of 9 listed pages (none at all)" in done.stderr, done.stderr[-2000:]
    status = scrapy(db, "status").stdout
    assert "pages 10: live 10, gone 0, missing 1" in status, status
    assert "fetched 0 of 9 listed pages (none at all)" in status, status


def test_the_documented_clock_moves_a_state_a_week_on(tmp_path: Path) -> None:
    """docs/operations.md's way forward in time, as written there: a crawl, then a week
    on by INCRECRAWL_TIME_SHIFT, status shows the pages due and a crawl fetches them."""
    page = (Path(__file__).parents[2] / "docs" / "operations.md").read_text()
    clock = re.search(r"^CLOCK=(INCRECRAWL_CLOCK=\S+)$", page, re.MULTILINE)
    week = re.search(r"^export INCRECRAWL_TIME_SHIFT=(\d+) ", page, re.MULTILINE)
    assert clock and week, "the documented commands"
    db = tmp_path / "try.sqlite"
    with SampleSite(pages=10) as site:
        first = run_process(crawl_command(site.sitemap_url, db, clock[1]), tmp_path)
        assert first.returncode == 0, first.stderr[-2000:]
        assert "10 pages due, 10 fetched" in first.stderr
        site.reset_counters()
        today = scrapy(db, "status", "-s", clock[1]).stdout
        assert "due now 0," in today, today
        shifted = {"INCRECRAWL_TIME_SHIFT": week[1]}
        command = [sys.executable, "-m", "scrapy", "increcrawl", "status"]
        later = run_process(
            [*command, "-s", f"INCRECRAWL_DB={db}", "-s", clock[1]], tmp_path, **shifted
        )
        assert "due now 10," in later.stdout, later.stdout + later.stderr
        # Without the same clock, the commands look at the real time: nothing due.
        assert "due now 0," in scrapy(db, "status").stdout
        again = run_process(crawl_command(site.sitemap_url, db, clock[1]), tmp_path, **shifted)
        assert again.returncode == 0, again.stderr[-2000:]
        assert "10 pages due, 10 fetched" in again.stderr, again.stderr[-2000:]
        assert sum(site.fetched.values()) == 10


def test_status_says_one_request_and_one_token_in_the_singular() -> None:
    from increcrawl_scrapy.commands.state import _text

    run = {
        "id": 1,
        "started_at": 0.0,
        "finished_at": 2.0,
        "close_reason": "finished",
        "discovery_complete": 1,
        "due": 1,
        "new": 1,
        "changed": 0,
        "gone": 0,
        "errors": 0,
        "api_requests": 1,
        "tokens_charged": 1,
        "listed": 1,
        "fetched": 1,
    }
    seed = {
        "seed": "s",
        "pages": 1,
        "live": 1,
        "gone": 0,
        "missing": 0,
        "due_now": 0,
        "due_24h": 0,
        "median_interval_days": 1.0,
        "lastmod_verdicts": {},
        "runs": [run],
    }
    tokens = {"week": 0, "month": 0, "budget": None}
    text = _text({"seeds": [seed], "tokens": tokens})
    assert "median interval 1 day\n" in text
    assert "API 1 request / 1 token, discovery complete" in text
    assert "fetched 1 of 1 listed page (as many as fetching them all)" in text
    # A run of a project's own spider (no discovery) listed nothing: its pages have state.
    run["discovery_complete"] = None
    text = _text({"seeds": [seed], "tokens": tokens})
    assert "fetched 1 of 1 page with state (as many" in text and "listed" not in text


def test_status_reads_a_state_one_schema_behind(tmp_path: Path) -> None:
    # The package upgraded, no crawl since (from a review: "no such column: hidden").
    db = str(tmp_path / "s.sqlite")
    with StateStore(db) as store:
        run = store.start_run("https://site.test/sitemap.xml")
        run.upsert([("https://site.test/a", None)])
        run.finish({}, discovery_complete=True)
    with sqlite3.connect(db) as con:  # as schema 9 left it
        con.execute("ALTER TABLE runs DROP COLUMN hidden")
        con.execute("ALTER TABLE pages DROP COLUMN sampled")
        con.execute("PRAGMA user_version = 9")
    reader = StateReader.open(db)
    try:
        assert "pages 1" in _text(_status(reader, time.time()))
    finally:
        reader.close()
