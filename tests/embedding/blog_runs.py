"""A Hugo blog (``tests/support/blog.py``) behind nginx, crawled day after day by a
``CrawlSpider`` with rules through the add-on, the clock moved a day a run: what each
run fetched (nginx's access log), delivered and checked directly
(``pages/unreached.py``). For ``test_listing_pages.py`` and the measure of issue
#50, item 12 (``benchmarks/listing_pages.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

from increcrawl_scrapy.pages.unreached import UNREACHED
from tests.conftest import Clock
from tests.crawling import add_on, run_crawl
from tests.support.blog import HugoBlog
from tests.support.nginx import free_port, nginx

DAY = 86_400.0


class BlogSpider(CrawlSpider):
    """What a user writes for a blog: posts give items, every other page of the
    site (home, pagination, tags) is followed for its links only."""

    name = "blog"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        post = re.escape(f"{site}/posts/") + r"[^/]+/$"
        self.rules = (
            Rule(LinkExtractor(allow=[post]), callback="parse_post", follow=True),
            Rule(LinkExtractor(allow=[re.escape(f"{site}/")]), follow=True),
        )
        super().__init__(**kwargs)
        self.start_urls = [f"{site}/"]

    def parse_post(self, response: Any) -> Any:
        text = " ".join(response.css("article p::text").getall()).strip()
        if not text:
            return  # a post emptied for now: no item
        yield {"url": response.url, "title": response.css("h1::text").get(), "text": text}


class BlogSitemapSpider(scrapy.spiders.SitemapSpider):
    """The same blog through Hugo's sitemap: every URL of it, each page an item."""

    name = "blog-sitemap"

    def __init__(self, site: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sitemap_urls = [f"{site}/sitemap.xml"]

    def parse(self, response: Any) -> Any:
        yield {"url": response.url, "title": response.css("title::text").get()}


@dataclass
class Run:
    day: float
    fetched: list[str]  # the paths nginx answered, in order
    items: list[dict[str, Any]]
    checked: list[str]  # the URLs checked directly (no response led to them)
    stats: dict[str, Any] = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)  # the run summary's lines

    def changes(self) -> list[tuple[str, str]]:
        return sorted((item["change"], item["url"]) for item in self.items)


#: Edits by day: what the site's authors do before that day's run.
Edits = dict[int, Callable[[HugoBlog], None]]


async def daily_runs(
    tmp: Path,
    days: int,
    edits: Edits,
    spider: type = BlogSpider,
    posts: int = 30,
    later: float = 0.0,  # days
    **settings: Any,
) -> tuple[HugoBlog, list[Run]]:
    """*days* daily runs over a blog of *posts*, *edits* made before their day's run;
    with *later*, one more run that long after the last (every page due)."""
    port = free_port()
    blog = HugoBlog(tmp / "blog", f"http://127.0.0.1:{port}", posts=posts)
    blog.build()
    clock = Clock(1_800_000_000.0)
    runs: list[Run] = []
    with nginx(blog.out, tmp / "nginx", port=port) as (_, access):
        schedule = [float(day) for day in range(days)] + ([days - 1 + later] if later else [])
        for day in schedule:
            if int(day) in edits and day < days:
                edits[int(day)](blog)
                blog.build()
            clock.now = 1_800_000_000.0 + day * DAY
            runs.append(await _run(blog, spider, tmp, clock, day, access, settings))
    return blog, runs


async def _run(
    blog: HugoBlog,
    spider: type,
    tmp: Path,
    clock: Clock,
    day: float,
    access: Path,
    more: dict[str, Any],
) -> Run:
    before = access.stat().st_size if access.exists() else 0
    checked: list[str] = []

    def scheduled(request: Any, spider: Any = None) -> None:
        if request.meta.get(UNREACHED):
            checked.append(request.url)

    settings = add_on(str(tmp / "state.sqlite"), clock, LOG_LEVEL="INFO", **more)
    result = await run_crawl(
        settings,
        spider_class=spider,
        site=blog.base_url,
        hooks={signals.request_scheduled: scheduled},
    )
    log = "\n".join(result.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    with access.open("rb") as lines:
        lines.seek(before)
        fetched = [line.split()[1].decode() for line in lines.read().splitlines() if line]
    summary = log[log.index("Run summary") :].splitlines()[:8] if "Run summary" in log else []
    return Run(day, fetched, result.items, checked, result.stats, summary)
