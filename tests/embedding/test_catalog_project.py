"""examples/catalog: an ordinary CrawlSpider with ``ADDONS`` and
``INCRECRAWL_SKIP_NOT_DUE`` only, crawled for real (``scrapy crawl`` in the project)
over several runs with a moved clock: any item type is fingerprinted whole, pages
not due are not fetched, due ones are asked conditionally, listings always fetched."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.servers import REPO

CATALOG = REPO / "examples" / "catalog"
KEY = "catalog-key-0123456789"
HOUR, DAY = 3_600.0, 86_400.0


class Project:
    def __init__(self, tmp_path: Path, site: SampleSite, api: GeonodeStandIn | None = None):
        self.tmp, self.site, self.api = tmp_path, site, api
        self.now = 1_800_000_000.0
        (tmp_path / "tclock.py").write_text(
            f"def now():\n    return float(open({str(tmp_path / 'now')!r}).read())\n"
        )
        self.runs = 0

    def crawl(self, *args: str, advance: float = 0, spider: str = "pages") -> list[dict]:
        self.now += advance
        (self.tmp / "now").write_text(str(self.now))
        self.runs += 1
        feed = self.tmp / f"run{self.runs}.jsonl"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GEONODE_API_KEY", "SCRAPY_SETTINGS_MODULE")
        }
        env["PYTHONPATH"] = os.pathsep.join([str(self.tmp), env.get("PYTHONPATH", "")])
        command = [
            sys.executable, "-m", "scrapy", "crawl", spider,
            *(args if spider == "due_products" else ("-a", f"start_url={self.site.url}/", *args)),
            "-o", f"{feed}:jsonlines",
            "-s", f"INCRECRAWL_DB={self.tmp / 'state.sqlite'}",
            "-s", "INCRECRAWL_CLOCK=tclock.now",
            "-s", "TELNETCONSOLE_ENABLED=False",
        ]  # fmt: skip
        if self.api is not None:
            env["GEONODE_API_KEY"] = KEY
            command += ["-s", f"GEONODE_API_URL={self.api.url}"]
        done = subprocess.run(
            command, cwd=CATALOG, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-3000:]
        self.log = done.stderr
        return [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []

    def stat(self, name: str) -> int:
        for line in self.log.splitlines():
            if f"'{name}':" in line:
                return int(line.split(":")[-1].strip().rstrip(",}"))
        return 0


@pytest.mark.parametrize("kind", ["dict", "item", "dataclass", "attrs"])
def test_any_item_type_is_fingerprinted_whole(tmp_path: Path, kind: str) -> None:
    with SampleSite(pages=6) as site:
        project = Project(tmp_path, site)
        first = project.crawl("-a", f"item={kind}")
        assert {item["url"] for item in first} == set(site.page_urls())
        if kind == "dict":  # the item has a field for the label
            assert {item["change"] for item in first} == {"new"}
        site.edit(2)
        again = project.crawl("-a", f"item={kind}", advance=2 * DAY)
        assert [item["url"] for item in again] == [site.page_url(2)]  # only the change
        # The five other pages, and the home page: a listing (pages/listings.py).
        assert project.stat("increcrawl/unchanged") == 5 + 1
        assert project.stat("increcrawl/pages/listings/unchanged") == 1


def test_pages_not_due_are_not_fetched(tmp_path: Path) -> None:
    with SampleSite(pages=12) as site:
        project = Project(tmp_path, site)
        assert len(project.crawl()) == 12
        assert site.requested["/"] == 1 and site.counters["pages"] == 12

        # An hour later: nothing is due, the listing neither (it has a schedule of
        # its own, pages/listings.py): nothing is fetched.
        site.reset_counters()
        assert project.crawl(advance=HOUR) == []
        assert site.requested["/"] == 0 and site.counters["pages"] == 0
        assert project.stat("increcrawl/skipped/not_due") == 12 + 1

        # Two days later everything is due: pages with validators are asked
        # conditionally (304: unchanged, the callback not called); the edit is caught.
        # The spider now marks page 5's request (meta "increcrawl_always").
        site.edit(3)
        site.reset_counters()
        changed = project.crawl("-a", "always=/page/5", advance=2 * DAY)
        assert [(item["url"], item["change"]) for item in changed] == [
            (site.page_url(3), "changed")
        ]
        assert sum(site.conditional.values()) > 0
        assert project.stat("increcrawl/skipped/not_modified") == sum(site.conditional.values())

        # A request may opt out of skipping: an hour later, the listing not due is
        # skipped, its requests replayed as it kept them, page 5's with its opt-out.
        site.reset_counters()
        assert project.crawl("-a", "always=/page/5", advance=HOUR) == []  # unchanged
        assert site.requested["/"] == 0
        assert site.counters["pages"] == 1 and site.requested["/page/5"] == 1

        # A new page is found through the listing once the listing is read again:
        # not while it is not due, within 5 days at most (pages/listings.py).
        (new,) = site.add()
        site.reset_counters()
        assert project.crawl("-a", "always=/page/5", advance=HOUR) == []
        added = project.crawl("-a", "always=/page/5", advance=5 * DAY)
        assert [(item["url"], item["change"]) for item in added] == [(site.page_url(new), "new")]
        assert site.requested["/"] == 1

        # increcrawl_reset: the schedule starts over.
        site.reset_counters()
        project.crawl("-a", "increcrawl_reset=1", advance=HOUR)
        assert project.stat("increcrawl/skipped/not_due") == 0
        assert site.counters["pages"] == 13  # every page asked (conditionally where it can)
        assert sum(site.conditional.values()) > 0


def test_through_geonode_an_ordinary_spider_gets_html(tmp_path: Path) -> None:
    with SampleSite(pages=6) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        project = Project(tmp_path, site, api)
        first = project.crawl()
        assert {item["url"] for item in first} == set(site.page_urls())
        assert all(item["title"] == f"Page {item['url'].rsplit('/', 1)[1]}" for item in first)
        bodies = [entry["body"] for entry in api.counters()["bodies"]]
        assert bodies and all(body["formats"] == ["html"] for body in bodies)
        before = api.counters()["requests"]["POST /v1/extract"]
        assert project.crawl(advance=HOUR) == []
        # Nothing went through the API: neither the pages nor the listing were due.
        assert api.counters()["requests"]["POST /v1/extract"] - before == 0


def intervals(db: Path) -> dict[str, float]:
    with sqlite3.connect(db) as con:
        return dict(con.execute("SELECT normalized_url, interval_s FROM pages"))


def test_a_page_of_several_items_changes_once_with_them(tmp_path: Path) -> None:
    with SampleSite(pages=4) as site:
        project = Project(tmp_path, site)
        first = project.crawl(spider="variants")
        assert len(first) == 12 and {item["change"] for item in first} == {"new"}
        assert project.stat("increcrawl/new") == 4 + 1  # pages, not items; the listing
        before = intervals(tmp_path / "state.sqlite")
        # Nothing edited: nothing reported, and the schedule backs off (it used to
        # see three "changes" a page and halve the interval every run).
        assert project.crawl(spider="variants", advance=2 * DAY) == []
        after = intervals(tmp_path / "state.sqlite")
        assert all(after[url] > before[url] for url in before)
        site.edit(2)
        changed = project.crawl(spider="variants", advance=4 * DAY)
        # Without INCRECRAWL_ITEM_KEY the items are matched with the page's last
        # version: only the variant that changed is delivered, with what changed.
        assert [(item["sku"], item["change"]) for item in changed] == [("2-b", "changed")]
        assert changed[0]["changed_fields"] == ["description"]
        assert project.stat("increcrawl/changed") == 1  # the page
        # Its two others, and the three of page 3 (no validators: fetched whole).
        assert project.stat("increcrawl/items/unchanged") == 2 + 3


def test_item_key_labels_each_item(tmp_path: Path) -> None:
    with SampleSite(pages=4) as site:
        project = Project(tmp_path, site)
        keyed = ("-s", "INCRECRAWL_ITEM_KEY=sku")
        assert len(project.crawl(*keyed, spider="variants")) == 12
        site.edit(2)
        changed = project.crawl(*keyed, spider="variants", advance=2 * DAY)
        assert [(item["sku"], item["change"]) for item in changed] == [("2-b", "changed")]
        assert project.stat("increcrawl/changed") == 1  # the page
        with sqlite3.connect(tmp_path / "state.sqlite") as con:
            rows = [r[0] for r in con.execute("SELECT normalized_url FROM pages")]
        assert f"{site.page_url(2)}#item:sku=2-b" in rows


def test_a_subclass_of_the_incremental_spider_with_its_own_callback(tmp_path: Path) -> None:
    with SampleSite(pages=6) as site:
        project = Project(tmp_path, site)
        source = ("-a", f"sitemap_url={site.sitemap_url}")
        first = project.crawl(*source, spider="due_products")
        assert {item["url"] for item in first} == set(site.page_urls())
        assert all("title" in item and "markdown" not in item for item in first)  # its items
        assert project.stat("increcrawl/new") == 6
        site.edit(4)
        again = project.crawl(*source, spider="due_products", advance=40 * DAY)
        assert [item["url"] for item in again] == [site.page_url(4)]
        assert project.stat("increcrawl/changed") == 1
        assert project.stat("increcrawl/due") == 6


def test_a_change_the_storage_did_not_take_is_reported_again(tmp_path: Path) -> None:
    with SampleSite(pages=6) as site:
        project = Project(tmp_path, site)
        outage = ("-s", f"CATALOG_FAIL_URLS={site.page_url(2)}")
        first = project.crawl(*outage)
        assert {item["url"] for item in first} == set(site.page_urls()) - {site.page_url(2)}
        # An hour later nothing is due, but page 2 was never recorded: it is fetched
        # and reported again, now that the storage takes it.
        again = project.crawl(advance=HOUR)
        assert [(item["url"], item["change"]) for item in again] == [(site.page_url(2), "new")]
        site.edit(4)
        project.crawl(*("-s", f"CATALOG_FAIL_URLS={site.page_url(4)}"), advance=2 * DAY)
        retried = project.crawl(advance=HOUR)
        assert [(item["url"], item["change"]) for item in retried] == [
            (site.page_url(4), "changed")
        ]
