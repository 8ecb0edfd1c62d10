"""increcrawl in an existing Scrapy project (examples/shop), enabled by the add-on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.servers import REPO

pytestmark = pytest.mark.e2e

KEY = "shop-secret-key-77"
SHOP = REPO / "examples" / "shop"


def shop_crawl(
    site: SampleSite, api: GeonodeStandIn, db: Path, feed: Path
) -> subprocess.CompletedProcess:
    env = {**os.environ, "GEONODE_API_KEY": KEY}
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scrapy",
            "crawl",
            "products",
            "-a",
            f"start_url={site.url}/",
            "-O",
            str(feed),
            "-s",
            f"GEONODE_API_URL={api.url}",
            "-s",
            f"INCRECRAWL_DB={db}",
        ],
        cwd=SHOP,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def crawl(site: SampleSite, api: GeonodeStandIn, db: Path, feed: Path) -> list[dict]:
    done = shop_crawl(site, api, db, feed)
    assert done.returncode == 0, done.stderr[-3000:]
    assert KEY not in done.stderr
    return json.loads(feed.read_text())


def test_shop_project_with_the_addon(tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite"
    with SampleSite(pages=10) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        first = crawl(site, api, db, tmp_path / "run1.json")
        assert {item["link"] for item in first} == set(site.page_urls())
        assert {item["change"] for item in first} == {"new"}
        assert all(item["currency"] == "EUR" for item in first)  # its own pipeline ran
        assert all(item["description"].startswith("Page ") for item in first)
        # Every page request went through the API (robots.txt went to the site itself).
        extracts = api.counters()["requests"]["POST /v1/extract"]
        assert extracts == 1 + len(site.page_urls())
        assert site.counters["pages"] == len(site.page_urls())
        assert site.fetched["/page/0"] == 1
        bodies = [entry["body"] for entry in api.counters()["bodies"]]
        assert all(body["formats"] == ["html"] for body in bodies)

        site.edit(4, text="A new description for product four.")
        second = crawl(site, api, db, tmp_path / "run2.json")
        assert [(item["link"], item["change"]) for item in second] == [
            (site.page_url(4), "changed")
        ]
        assert second[0]["description"] == "A new description for product four."
        assert second[0]["currency"] == "EUR"


def test_a_database_in_use_is_one_line_and_its_own_close_reason(tmp_path: Path) -> None:
    db = tmp_path / "shop.sqlite"
    with (
        SampleSite(pages=4) as site,
        GeonodeStandIn(api_keys=[KEY]) as api,
        StateStore(db, exclusive=True),  # another crawl holds it
    ):
        done = shop_crawl(site, api, db, tmp_path / "run.json")
        assert api.counters()["requests"].get("POST /v1/extract", 0) == 0
    errors = [line for line in done.stderr.splitlines() if " ERROR: " in line]
    assert len(errors) == 1 and "Try later: state database" in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "'finish_reason': 'database_in_use'" in done.stderr
    assert json.loads((tmp_path / "run.json").read_text()) == []
