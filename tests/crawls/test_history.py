"""What each run fetched, kept in the state (``state/history.py``), through real
crawls on both backends: each run's responses by kind on its row, its change set
and each page's checks in ``checks``, only for the last INCRECRAWL_HISTORY_RUNS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0


def _state(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / "state.sqlite")
    return str(request.getfixturevalue("postgres_dsn"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest_twisted.ensureDeferred
async def test_each_run_keeps_its_checks_and_responses_by_kind(
    backend: str, tmp_path: Path, clock: Clock, request: pytest.FixtureRequest
) -> None:
    db = _state(backend, tmp_path, request)
    settings = crawl_settings(db, clock, INCRECRAWL_HISTORY_RUNS=2)
    with SampleSite(pages=8) as site:
        urls = {i: site.page_url(i) for i in range(8)}

        async def run() -> None:
            clock.advance(2 * DAY)
            assert (await run_crawl(settings, sitemap_url=site.sitemap_url)).reason == "finished"

        await run()  # 1: every page new
        site.edit(2)
        site.fail(3, 500)
        await run()  # 2: one changed, one failing, the rest 304
        site.fail(3, None)
        site.delete(5)
        await run()  # 3: one gone

    mark = "?" if backend == "sqlite" else "%s"  # each backend's parameters
    with StateStore(db) as store:
        execute = store.database.execute
        runs = [dict(row) for row in execute("SELECT id, statuses FROM runs ORDER BY id")]
        assert len(runs) == 3
        statuses = [json.loads(row["statuses"]) for row in runs]
        assert statuses[0] == {"200": 8}
        # Pages with validators answer 304; the others, and the edited one, 200.
        assert statuses[1]["HTTP 500"] == 1 and statuses[1]["304"] >= 1
        assert sum(statuses[1].values()) == sum(statuses[2].values()) == 8
        assert statuses[2]["404"] == 1
        # Only the last two runs keep their checks; the first keeps its counts.
        kept = {row[0]: row[1] for row in execute("SELECT run, count(*) FROM checks GROUP BY run")}
        assert set(kept) == {runs[1]["id"], runs[2]["id"]}
        assert kept[runs[1]["id"]] == 8

        def changes(run_id: int) -> dict[str, str]:
            rows = execute(
                "SELECT p.url, c.outcome, c.kind FROM checks AS c JOIN pages AS p ON p.id = c.page "
                f"WHERE c.run = {mark} AND c.outcome NOT IN ('not_modified', 'unchanged')",
                (run_id,),
            )
            return {row[0]: row[1] + (f" {row[2]}" if row[2] else "") for row in rows}

        assert changes(runs[1]["id"]) == {urls[2]: "changed", urls[3]: "error HTTP 500"}
        assert changes(runs[2]["id"])[urls[5]] == "gone"
        # A page's history: its checks over the kept runs, with their times.
        history = execute(
            "SELECT c.at, c.status, c.outcome FROM checks AS c JOIN pages AS p ON p.id = c.page "
            f"WHERE p.url = {mark} ORDER BY c.at",
            (urls[3],),
        ).fetchall()
        assert [tuple(row)[1:] for row in history] == [(500, "error"), (200, "unchanged")]
        assert history[1][0] - history[0][0] == 2 * DAY


@pytest_twisted.ensureDeferred
async def test_no_checks_kept_with_a_history_of_zero_runs(tmp_path: Path, clock: Clock) -> None:
    db = str(tmp_path / "state.sqlite")
    with SampleSite(pages=4) as site:
        settings = crawl_settings(db, clock, INCRECRAWL_HISTORY_RUNS=0)
        assert (await run_crawl(settings, sitemap_url=site.sitemap_url)).reason == "finished"
    with StateStore(db) as store:
        assert store.database.execute("SELECT count(*) FROM checks").fetchone()[0] == 0
        (statuses,) = store.database.execute("SELECT statuses FROM runs").fetchone()
        assert json.loads(statuses) == {"200": 4}


@pytest_twisted.ensureDeferred
async def test_a_forgotten_page_takes_its_checks_along(tmp_path: Path, clock: Clock) -> None:
    db = str(tmp_path / "state.sqlite")
    with SampleSite(pages=4) as site:
        settings = crawl_settings(db, clock)
        assert (await run_crawl(settings, sitemap_url=site.sitemap_url)).reason == "finished"
        forgotten = site.page_url(1)
    with StateStore(db) as store:
        assert store.forget(url=forgotten) == 1
        assert store.database.execute("SELECT count(*) FROM checks").fetchone()[0] == 3


def test_failures_are_counted_by_what_failed() -> None:
    from scrapy.http import Request, Response
    from scrapy.spidermiddlewares.httperror import HttpError
    from twisted.internet.error import ConnectionRefusedError, DNSLookupError, TCPTimedOutError
    from twisted.internet.error import TimeoutError as DownloadTimeout

    from increcrawl_scrapy.geonode.errors import GeonodeApiError, GeonodeRetriesExhausted
    from increcrawl_scrapy.spiders.page_items import error_kind

    answer = Response("https://example.com/", status=503, request=Request("https://example.com/"))
    assert error_kind(HttpError(answer)) == "HTTP 503"
    assert error_kind(DownloadTimeout()) == error_kind(TCPTimedOutError()) == "timeout"
    assert error_kind(DNSLookupError()) == error_kind(ConnectionRefusedError()) == "connection"
    assert error_kind(GeonodeApiError(422, "CAPTCHA_CHALLENGE", "no")) == "API CAPTCHA_CHALLENGE"
    assert error_kind(GeonodeApiError(400, None, "bad request")) == "API 400"
    assert error_kind(GeonodeRetriesExhausted("gave up", "TIMEOUT")) == "API TIMEOUT"
    assert error_kind(GeonodeRetriesExhausted("gave up")) == "API"
    assert error_kind(ValueError("odd")) == "ValueError"
