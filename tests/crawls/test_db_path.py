from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl


@pytest.mark.parametrize("under_scrapyd", [False, True])
@pytest_twisted.ensureDeferred
async def test_relative_database_path_is_resolved_and_logged(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch, under_scrapyd: bool
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCRAPY_JOB", raising=False)  # Scrapyd 1.6 does not set it
    job = {"_job": "0123abcd"} if under_scrapyd else {}  # what Scrapyd passes
    with SampleSite(pages=4) as site:
        result = await run_crawl(
            crawl_settings("relative.sqlite", clock), sitemap_url=site.sitemap_url, **job
        )
    assert (tmp_path / "relative.sqlite").exists()
    level = "WARNING" if under_scrapyd else "INFO"
    lines = [line for line in result.log if "relative.sqlite" in line]
    assert lines and lines[0].startswith(level)
    assert str(tmp_path / "relative.sqlite") in lines[0]
