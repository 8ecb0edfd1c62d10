"""trafilatura's per-page DEBUG messages are not made when the crawl does not log
DEBUG (each was made and then dropped by Scrapy's handler: about 1% of a first run on
pages that mark no main content); they are when it does, and a level the user set on
its logger is kept. Crawls through Scrapy of pages served by nginx."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_twisted
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.content import library_logs
from increcrawl_scrapy.content.library_logs import LIBRARIES
from tests.conftest import Clock
from tests.crawling import PagesSpider, crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        nginx_binary() is None, reason="nginx is not installed (.ci/run installs it)"
    ),
]

_WORDS = [
    "the",
    "crawler",
    "keeps",
    "each",
    "page",
    "with",
    "its",
    "own",
    "state",
    "and",
    "fetches",
    "it",
    "again",
]


def _site(root: Path, base: str, pages: int = 3) -> str:
    """Pages naming no main content (trafilatura extracts it), and their sitemap."""
    for i in range(pages):
        text = "".join(
            "<p>" + " ".join(_WORDS[(i + j + k) % len(_WORDS)] for k in range(60)) + "</p>"
            for j in range(8)
        )
        (root / f"p{i}.html").write_text(
            f"<html><head><title>Page {i}</title></head><body>"
            "<nav><a href='/p0.html'>Home</a></nav>"
            f'<div class="c7"><h1>Page {i}</h1>{text}</div><footer>(c) 2026</footer></body></html>'
        )
    urls = "".join(f"<url><loc>{base}/p{i}.html</loc></url>" for i in range(pages))
    (root / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{urls}</urlset>"
    )
    return f"{base}/sitemap.xml"


@pytest.fixture(autouse=True)
def _levels_as_found() -> Iterator[None]:
    """The libraries' levels and what the module set, as before the test: other tests
    in the process see them as a first crawl does."""
    levels = {name: logging.getLogger(name).level for name in LIBRARIES}
    remembered = dict(library_logs._set)
    yield
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    library_logs._set.clear()
    library_logs._set.update(remembered)


class _Counted(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _trafilatura_records() -> Iterator[_Counted]:
    """The records trafilatura's logger makes, the root logger at NOTSET as Scrapy's
    CrawlerProcess leaves it (``install_scrapy_root_handler``), as found after."""
    logger, root = logging.getLogger("trafilatura"), logging.getLogger()
    handler, root_level = _Counted(), root.level
    logger.addHandler(handler)
    root.setLevel(logging.NOTSET)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        root.setLevel(root_level)


@pytest_twisted.ensureDeferred
async def test_the_extraction_library_logs_at_the_crawls_level(
    tmp_path: Path, clock: Clock
) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access), _trafilatura_records() as made:
        sitemap = _site(root, url)

        # LOG_LEVEL=INFO (the project's): none of its DEBUG messages is made.
        quiet = await run_crawl(
            crawl_settings(str(tmp_path / "a.sqlite"), clock, LOG_LEVEL="INFO"),
            sitemap_url=sitemap,
        )
        assert quiet.stats.get("increcrawl/content/extracted") == 3  # trafilatura's work
        assert [r.getMessage() for r in made.records if r.levelno == logging.DEBUG] == []

        # LOG_LEVEL=DEBUG: the user asked for them, they are made.
        loud = await run_crawl(
            crawl_settings(str(tmp_path / "b.sqlite"), clock, LOG_LEVEL="DEBUG"),
            sitemap_url=sitemap,
        )
        assert loud.stats.get("increcrawl/content/extracted") == 3
        assert any(r.levelno == logging.DEBUG for r in made.records)

        # A level the user set on the library's logger is the user's: kept.
        made.records.clear()
        for name in LIBRARIES:
            logging.getLogger(name).setLevel(logging.DEBUG)
        mine = await run_crawl(
            crawl_settings(str(tmp_path / "c.sqlite"), clock, LOG_LEVEL="WARNING"),
            sitemap_url=sitemap,
        )
        assert mine.stats.get("increcrawl/content/extracted") == 3
        assert logging.getLogger("trafilatura").level == logging.DEBUG
        assert any(r.levelno == logging.DEBUG for r in made.records)


@pytest_twisted.ensureDeferred
async def test_in_the_add_on_too(tmp_path: Path, clock: Clock) -> None:
    root = tmp_path / "www"
    root.mkdir()
    with nginx(root, tmp_path / "nginx") as (url, _access), _trafilatura_records() as made:
        _site(root, url)
        settings = {
            "ADDONS": {"increcrawl_scrapy.Addon": 300},
            "INCRECRAWL_DB": str(tmp_path / "s.sqlite"),
            "INCRECRAWL_CLOCK": clock,
            "TELNETCONSOLE_ENABLED": False,
            "LOG_LEVEL": "INFO",
        }
        crawler = Crawler(PagesSpider, Settings(settings))
        await crawler.crawl(urls=[f"{url}/p{i}.html" for i in range(3)])
        assert crawler.stats is not None
        assert crawler.stats.get_value("item_scraped_count", 0) >= 3
        assert [r.getMessage() for r in made.records if r.levelno == logging.DEBUG] == []
