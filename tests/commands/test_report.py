"""``scrapy increcrawl report`` after a few runs, opened in headless Chromium with
no network: the charts render from the file alone, with no console error; what
changed in each run, with dates, diffs, responses by kind, tokens and each page's
history, as the runs' real crawls left them."""

from __future__ import annotations

import calendar
import itertools
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.state.sqlite.schema import APPLICATION_ID, MIGRATIONS
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.browser import chromium, open_file, screenshot
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.support.process import run_process

DAY = 86_400.0
RUNS = 4
ARTIFACTS = Path(
    os.environ.get("INCRECRAWL_TEST_ARTIFACTS", Path(__file__).parents[2] / "test-artifacts")
)


def increcrawl(db: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, db.parent)


async def crawl_history(db: Path, site: SampleSite, clock: Clock) -> None:
    """Runs two days apart: page 2 edited each time, one other page too; a page
    deleted and two added on the third."""
    for run in range(RUNS):
        clock.advance(2 * DAY)
        if run:
            site.edit(2)
            site.edit(6 + run)
        if run == 2:
            site.delete(5)
            site.add(2)
        result = await run_crawl(crawl_settings(str(db), clock), sitemap_url=site.sitemap_url)
        assert result.reason == "finished"


@pytest_twisted.ensureDeferred
async def test_report_needs_an_output_and_a_database(tmp_path: Path) -> None:
    none = increcrawl(tmp_path / "none.sqlite", "report", "-o", str(tmp_path / "r.html"))
    assert none.returncode == 1 and "No state database" in none.stdout
    no_output = increcrawl(tmp_path / "none.sqlite", "report")
    assert no_output.returncode == 2 and "needs -o FILE" in no_output.stdout


def test_report_of_a_state_no_crawl_of_this_version_opened(tmp_path: Path) -> None:
    """A state of schema 8 (before the runs' checks) says what brings it up to date."""
    db = tmp_path / "old.sqlite"
    connection = sqlite3.connect(db)
    for statements in MIGRATIONS[:8]:
        for statement in statements:
            connection.execute(statement)
    connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    connection.execute("PRAGMA user_version = 8")
    connection.commit()
    connection.close()
    done = increcrawl(db, "report", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 1
    assert "has schema version 8, the report reads 10: a crawl with this package" in done.stdout


@pytest.mark.e2e
@pytest.mark.skipif(chromium() is None and not os.environ.get("CI"), reason="no chromium")
@pytest_twisted.ensureDeferred
async def test_report_renders_in_a_browser(tmp_path: Path, clock: Clock) -> None:
    db, out = tmp_path / "state.sqlite", tmp_path / "report.html"
    with SampleSite(pages=16) as site:
        await crawl_history(db, site, clock)
        edited, host = site.page_url(2), site.url.split("//", 1)[1]
    done = increcrawl(db, "report", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Wrote {out}: 1 seed, {RUNS} runs" in done.stdout
    html = out.read_text()
    # Self-contained: nothing to load.
    for outside in ("<script src", "<link", "@import", "url("):
        assert outside not in html

    opened = open_file(out)
    root = opened.dom
    assert opened.console_errors == []
    assert root.get("data-error") is None and root.get("data-rendered") == "1"
    for chart, bars in (("changes-0", 3 * RUNS), ("requests-0", 2 * RUNS), ("intervals-0", 7)):
        rects = root.xpath(
            f'//*[@id="{chart}"]//*[local-name()="rect" and contains(@class, "bar")]'
        )
        assert len(rects) == bars, chart
        assert sum(float(rect.get("height")) for rect in rects) > 0, chart
    changing = [row.xpath("string(td[1])") for row in root.xpath('//*[@id="changing-0"]//tr[td]')]
    assert changing[0] == edited  # edited every run after the first
    assert root.xpath('//table[@id="verdicts-0"]//td[1]/text()') == [host]
    assert len(root.xpath('//table[@id="runs-0"]//tr')) == RUNS + 1
    screenshot(out, ARTIFACTS / "report.png")

    # The check can fail: a script error in the same file is seen.
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace('"use strict";', '"use strict"; undefinedFunction();', 1))
    seen = open_file(broken)
    assert seen.console_errors or seen.dom.get("data-error")
    assert seen.dom.get("data-rendered") is None


@pytest.mark.e2e
@pytest.mark.skipif(chromium() is None and not os.environ.get("CI"), reason="no chromium")
@pytest_twisted.ensureDeferred
async def test_one_of_a_kind_is_said_in_the_singular(tmp_path: Path, clock: Clock) -> None:
    db, out = tmp_path / "state.sqlite", tmp_path / "report.html"
    with SampleSite(pages=1) as site:
        result = await run_crawl(crawl_settings(str(db), clock), sitemap_url=site.sitemap_url)
        assert result.reason == "finished"
    done = increcrawl(db, "report", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Wrote {out}: 1 seed, 1 run\n" in done.stdout
    root = open_file(out).dom
    summary = root.xpath('string(//details[@class="changeset"]/summary)')
    assert " UTC · 1 page fetched" in summary, summary


async def crawl_months(
    db: Path, site: SampleSite, api: GeonodeStandIn, clock: Clock
) -> tuple[list[int], list[str]]:
    """Five runs three days apart: the first two through the Geonode stand-in
    (tokens), then direct (then 304s: the fetcher setting changed); page 2 edited every
    run, page 9 failing once with 503, page 5 deleted and a page added in the
    fourth. Returns the runs' start times and page 2's texts."""
    starts, texts = [], []
    for run in range(5):
        clock.advance(3 * DAY)
        if run:
            site.edit(2)
        site.fail(9, 503 if run == 2 else None)
        if run == 3:
            site.delete(5)
            site.add(1)
        settings = crawl_settings(
            str(db), clock, api if run < 2 else None, INCRECRAWL_KEEP_CONTENT=True
        )
        starts.append(int(clock()))
        texts.append(site.text(2))
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert result.reason == "finished"
    return starts, texts


def _tick_days(ticks: list[str], near: float) -> list[float]:
    """The axis's "Dec 05" labels as the Unix time of their day (UTC), the year
    taken from ``near`` and moved on where the labels pass a new year."""
    year, days = time.gmtime(near).tm_year, []
    for tick in ticks:
        day = calendar.timegm(time.strptime(f"{year} {tick}", "%Y %b %d"))
        if days and day < days[-1]:
            year += 1
            day = calendar.timegm(time.strptime(f"{year} {tick}", "%Y %b %d"))
        days.append(float(day))
    return days


@pytest.mark.e2e
@pytest.mark.skipif(chromium() is None and not os.environ.get("CI"), reason="no chromium")
@pytest_twisted.ensureDeferred
async def test_report_shows_what_changed_in_each_run(tmp_path: Path, api: GeonodeStandIn) -> None:
    db, out = tmp_path / "state.sqlite", tmp_path / "report.html"
    # Half an hour after a midnight (UTC): the axis's ticks then fall between the
    # runs' days, as they did when CI ran at 00:31. Still after the real clock once
    # the first run's three days have passed, so the sitemap's dates are not ahead.
    clock = Clock(time.time() // DAY * DAY + 1_800)
    with SampleSite(pages=12) as site:
        starts, texts = await crawl_months(db, site, api, clock)
        edited, gone, failing = site.page_url(2), site.page_url(5), site.page_url(9)
        added, quiet, unknown_url = site.page_url(12), site.page_url(3), site.page_url(99)
    done = increcrawl(db, "report", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    opened = open_file(out)
    root = opened.dom
    assert opened.console_errors == [] and root.get("data-error") is None
    assert root.get("data-rendered") == "1"

    # The time axis is dated, evenly, and spans the runs: the first and the last run
    # each within a step of the first and the last tick (where the ticks fall
    # depends on the hour of the runs).
    ticks = root.xpath('//*[@id="changes-0"]//*[local-name()="text" and @class="tick"]/text()')
    days = _tick_days(ticks, starts[0])
    step = days[1] - days[0]
    assert len(days) >= 3 and all(b - a == step for a, b in itertools.pairwise(days))
    assert abs(starts[0] - days[0]) < step and abs(starts[-1] - days[-1]) < step
    bars = root.xpath('//*[@id="changes-0"]//*[local-name()="rect" and contains(@class, "bar")]')
    xs = sorted({float(bar.get("x")) for bar in bars})
    gaps = [b - a for a, b in itertools.pairwise(xs)]
    assert len(xs) == 5 and max(gaps) - min(gaps) < 1.0  # runs evenly spaced in time

    # Each run's change set: URLs, labels, dates; the latest first.
    sets = root.xpath('//details[@class="changeset"]')
    assert [s.get("id") for s in sets][:1] == [f"run-0-{5}"]

    def changes(run: int) -> dict[str, list[str]]:
        rows = root.xpath(f'//details[@id="run-0-{run}"]//tr[@class="change"]')
        return {
            row.xpath("string(td[1])"): [
                row.xpath("string(td[2])"),
                row.xpath("string(td[3])"),
                row.xpath("string(td[4])"),
            ]
            for row in rows
        }

    first = changes(1)
    assert len(first) == 12 and {label for label, *_ in first.values()} == {"new"}
    fourth = changes(4)
    assert fourth[edited][0] == "changed" and fourth[gone][0] == "gone"
    assert fourth[added][0] == "new"
    assert fourth[edited][1].startswith(time.strftime("%Y-%m-%d", time.gmtime(starts[3])))
    # Page 2's last change (run 5) has its diff, kept; run 4's change is not.
    last = changes(5)
    assert last[edited][0] == "changed" and last[edited][2] == "diff"
    assert fourth[edited][2] == "not kept"
    link = root.xpath('//details[@id="run-0-5"]//a[@class="diff"]/@href')[0]
    diff = root.xpath(f'//*[@id="{link[1:]}"]//pre')[0]
    assert diff.xpath('string(span[@class="file"])') == f"--- {edited} (before)"
    removed, added = (
        diff.xpath('span[@class="del"]/text()'),
        diff.xpath('span[@class="add"]/text()'),
    )
    assert removed == [f"-{texts[-2]}"] and added == [f"+{texts[-1]}"]
    assert failing not in changes(3)  # a failure is no change

    # Responses by kind: 200s, then 304s once direct, the 503 and the 404.
    kinds = root.xpath('//*[@id="statuses-0"]/following-sibling::div[1]//span/text()')
    assert {"200", "304", "404", "HTTP 503"} <= set(kinds)
    runs = {
        row.xpath("string(td[1])"): row.xpath("string(td[10])")
        for row in root.xpath('//table[@id="runs-0"]//tr[td]')
    }
    # (The API sees no validators: direct fetches ask conditionally from the second on.)
    assert "HTTP 503: 1" in runs["#3"] and "304: " in runs["#4"] and "404: 1" in runs["#4"]
    # Tokens over time: charged by the runs through the API only.
    tokens = root.xpath('//*[@id="tokens-0"]//*[local-name()="rect"]')
    heights = [float(bar.get("height")) for bar in tokens]
    assert len(heights) == 5 and all(h > 0 for h in heights[:2]) and heights[2:] == [0, 0, 0]
    # The state's tokens this week and plan month, as the run summary says them.
    plan = root.xpath('string(//*[@id="tokens-plan"])')
    assert plan.startswith("Tokens: ") and " since " in plan and "projected" in plan

    # A page's history: each of its checks, with date, status and outcome.
    page = root.xpath(f'//details[@class="page" and @data-url="{failing}"]')[0]
    checks = [
        [cell.text_content() for cell in row.xpath("td")]
        for row in page.xpath('.//tr[@class="check"]')
    ]
    assert [row[0] for row in checks] == ["#5", "#4", "#3", "#2", "#1"]
    assert checks[2][2:] == ["503", "error: HTTP 503"] and checks[-1][3] == "new"
    assert len(page.xpath('.//*[local-name()="circle"]')) == 5
    # The change list links to it.
    assert root.xpath(f'//a[@class="page" and text()="{edited}"]/@href')
    screenshot(out, ARTIFACTS / "report-changes.png", size="1280,3950")  # docs/report.png

    # Any page's history on request, first (on a larger site one that never changed is
    # in no list; here every page was new in the first run shown).
    assert root.xpath('(//details[@class="page"])[1]/@data-url') != [quiet]
    asked = tmp_path / "asked.html"
    done = increcrawl(db, "report", "-o", str(asked), quiet + "#a-fragment")
    assert done.returncode == 0, done.stdout + done.stderr
    page = open_file(asked).dom.xpath('(//details[@class="page"])[1]')[0]
    assert page.get("data-url") == quiet
    checks = [
        [cell.text_content() for cell in row.xpath("td")]
        for row in page.xpath('.//tr[@class="check"]')
    ]
    assert len(checks) >= 4 and checks[-1][0] == "#1"
    assert checks[-1][3] == "new" and {row[3] for row in checks[:-1]} == {"unchanged"}
    unknown = increcrawl(db, "report", "-o", str(asked), unknown_url)
    assert unknown.returncode == 1 and "No page" in unknown.stdout
    assert increcrawl(db, "report", "-o", str(asked), "not a url").returncode == 2


@pytest.mark.e2e
@pytest.mark.skipif(chromium() is None and not os.environ.get("CI"), reason="no chromium")
@pytest_twisted.ensureDeferred
async def test_page_text_that_looks_like_markup_never_breaks_the_report(
    tmp_path: Path, clock: Clock
) -> None:
    """A kept diff holding ``<!--<script>`` (a page quoting HTML) once blanked the whole
    report in Chromium: inside a script element it starts the double-escaped state,
    where the island's end tag no longer ends it (#53, 2)."""
    db, out = tmp_path / "state.sqlite", tmp_path / "report.html"
    quoted = "Quote: <!--<script> and </style> & more"
    with SampleSite(pages=2) as site:
        for run in range(2):
            if run:
                site.edit(1, text=quoted)
            clock.advance(DAY)
            settings = crawl_settings(str(db), clock, INCRECRAWL_KEEP_CONTENT=True)
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert result.reason == "finished"
    done = increcrawl(db, "report", "-o", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    opened = open_file(out)
    assert opened.console_errors == [] and opened.dom.get("data-error") is None
    assert opened.dom.get("data-rendered") == "1"
    added = opened.dom.xpath('//span[@class="add"]/text()')
    assert any("<!--<script>" in line for line in added), added
