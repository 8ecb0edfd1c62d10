"""The fingerprint taken with the page's text on the content thread: the same one
the pipeline takes, never stale when something in between changes the text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_twisted

from increcrawl_scrapy import pipelines
from increcrawl_scrapy.content.fingerprint import TakenPrints, content_fingerprint
from increcrawl_scrapy.testing import SampleSite
from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl


class EditingPipeline:
    """A user's pipeline before the state's: it rewrites the page's markdown."""

    def process_item(self, item: Any, spider: Any = None) -> Any:
        if item.get("markdown"):
            item["markdown"] += "\n\nEdited by the project's own pipeline."
        return item


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fingerprints the pipeline takes itself (on the reactor's thread or its pool)."""
    taken: list[str] = []

    def counted(text: str, extra: Any = ()) -> str:
        taken.append(text)
        return content_fingerprint(text, extra)

    monkeypatch.setattr(pipelines, "content_fingerprint", counted)
    return taken


@pytest_twisted.ensureDeferred
async def test_the_pipeline_finds_each_page_fingerprint_taken_with_its_text(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _counting(monkeypatch)
    with SampleSite(pages=12) as site:
        settings = crawl_settings(str(tmp_path / "state.sqlite"), clock)
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
        assert len(result.items) == 12 and result.changes("new") == set(site.page_urls())
    for item in result.items:
        assert item["content_hash"] == content_fingerprint(item["markdown"])
    assert taken == []  # none taken again by the pipeline


@pytest_twisted.ensureDeferred
async def test_a_text_changed_in_between_is_fingerprinted_as_it_is_recorded(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _counting(monkeypatch)
    with SampleSite(pages=12) as site:
        settings = crawl_settings(
            str(tmp_path / "state.sqlite"),
            clock,
            ITEM_PIPELINES={"tests.crawls.test_prints_beforehand.EditingPipeline": 100},
        )
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.items) == 12
    for item in result.items:
        assert item["markdown"].endswith("Edited by the project's own pipeline.")
        assert item["content_hash"] == content_fingerprint(item["markdown"])
    assert len(taken) == 12  # the stale ones were not used


@pytest_twisted.ensureDeferred
async def test_users_rules_are_taken_by_the_pipeline_as_before(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    taken = _counting(monkeypatch)
    rule = r"Page \d+"
    with SampleSite(pages=12) as site:
        settings = crawl_settings(
            str(tmp_path / "state.sqlite"), clock, INCRECRAWL_VOLATILE_PATTERNS=[rule]
        )
        result = await run_crawl(settings, sitemap_url=site.sitemap_url)
    assert len(result.items) == 12
    for item in result.items:
        assert item["content_hash"] == content_fingerprint(item["markdown"], [rule])
    assert len(taken) == 12


def test_prints_taken_beforehand_are_bounded_and_given_once() -> None:
    prints = TakenPrints(size=3)
    for n in range(5):
        prints.put(f"text {n}", f"print {n}")
    assert "text 0" not in prints and "text 1" not in prints  # the oldest forgotten
    assert prints.pop("text 4") == "print 4"
    assert prints.pop("text 4") is None
    # Large texts: at most so many characters kept, the oldest let go first.
    prints = TakenPrints(size=100, chars=1000)
    for n in range(5):
        prints.put(f"{n}" * 400, f"print {n}")
    assert [f"{n}" * 400 in prints for n in range(5)] == [False, False, False, True, True]
    prints.put("x" * 1001, "too large to keep")
    assert "x" * 1001 not in prints and "4" * 400 in prints


@pytest_twisted.ensureDeferred
async def test_the_page_items_layer_runs_only_for_spiders_with_items_of_their_own(
    tmp_path: Path, clock: Clock
) -> None:
    from scrapy import signals
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

    from increcrawl_scrapy.pages.middleware import PageItemsMiddleware
    from increcrawl_scrapy.spiders.incremental import IncrementalSpider
    from tests.crawls.test_item_rows import VariantsSpider

    layers: dict[str, bool] = {}
    with SampleSite(pages=3) as site:
        for name, spider_class in (("ours", IncrementalSpider), ("rules", VariantsSpider)):
            settings = crawl_settings(str(tmp_path / f"{name}.sqlite"), clock)
            crawler = Crawler(spider_class, Settings(settings))

            def opened(crawler: Crawler = crawler, name: str = name) -> None:
                assert crawler.engine is not None
                chain = crawler.engine.scraper.spidermw.middlewares
                layers[name] = any(isinstance(mw, PageItemsMiddleware) for mw in chain)

            crawler.signals.connect(opened, signal=signals.spider_opened)
            await crawler.crawl(sitemap_url=site.sitemap_url)
    assert layers == {"ours": False, "rules": True}
