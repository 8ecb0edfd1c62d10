"""``scrapy increcrawl report`` after a few runs, opened in headless Chromium with
no network: the charts render from the file alone, with no console error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from increcrawl_scrapy.testing.process import run_process
from tests.browser import chromium, open_file, screenshot
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl

DAY = 86_400.0
RUNS = 4
ARTIFACTS = Path(
    os.environ.get("INCRECRAWL_TEST_ARTIFACTS", Path(__file__).parent.parent / "test-artifacts")
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
    assert f"Wrote {out}: 1 seeds, {RUNS} runs" in done.stdout
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
    changing = root.xpath('//table[@id="changing-0"]//td[1]/text()')
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
