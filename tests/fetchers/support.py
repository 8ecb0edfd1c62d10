"""A fetcher on its own, as Scrapy's download handlers are tested: a crawler made
from settings (no engine, no crawl), the inputs a spider would give, and the
fetcher's coroutines run as Deferreds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.http import Request, TextResponse
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.test import get_crawler

from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.crawl.validators import conditions
from increcrawl_scrapy.schedule.rows import PageState
from increcrawl_scrapy.scope import Scope
from increcrawl_scrapy.spiders.fetchers import Fetcher, FetchInputs, fetcher_for
from increcrawl_scrapy.spiders.page_content import PageContent
from increcrawl_scrapy.spiders.page_items import META_KEY, META_URL
from increcrawl_scrapy.spiders.progress import Progress
from increcrawl_scrapy.state import CHUNK
from tests.crawling import crawl_settings

SITE = "http://site.test"


def page(path: str, **fields: Any) -> PageState:
    """A due row for *path* on SITE (or for the URL *path*)."""
    url = path if "://" in path else SITE + path
    row = dict.fromkeys(PageState._fields)
    row.update(normalized_url=url, url=url, seed=SITE + "/sitemap.xml", next_check=0.0)
    row.update(missing_runs=0, gone=False, change_count=0, fetch_count=0, error_count=0)
    row.update(fields)
    return PageState(**row)


class Made(SimpleNamespace):
    """A fetcher and what it was given: ``closed`` (reason, why) and ``robots`` asked."""

    fetcher: Fetcher
    crawler: Any
    closed: list[tuple[str, str]]
    robots: list[str]


def made(
    tmp_path: Path,
    clock: Any,
    api: Any = None,
    *,
    ruled: Iterable[str] = (),
    robots_txt: str | None = None,
    chunk: int = CHUNK,
    site: str = SITE,
    **settings: Any,
) -> Made:
    """The fetcher ``fetcher_for`` picks for *settings* (Geonode's with *api*)."""
    crawler = get_crawler(
        scrapy.Spider, crawl_settings(str(tmp_path / "s.sqlite"), clock, api, **settings)
    )
    crawler.engine = crawler._create_engine()  # made, never started: no crawl
    config = config_for(crawler)
    closed: list[tuple[str, str]] = []
    robots: list[str] = []

    def page_request(row: PageState) -> Request:
        meta = {META_URL: row.url, META_KEY: row.normalized_url}
        return Request(row.url, headers=conditions(row), meta=meta, dont_filter=True)

    async def site_fetch(url: str, headers: Any = None) -> TextResponse | None:
        robots.append(url)
        if robots_txt is None:
            return None
        return TextResponse(url, body=robots_txt.encode(), encoding="utf-8")

    ruled = set(ruled)
    inputs = FetchInputs(
        crawler=crawler,
        config=config,
        page_request=page_request,
        ruled=lambda url: url in ruled,
        close=lambda reason, why: closed.append((reason, why)),
        content=PageContent.of(crawler, config, site, Scope(urlsplit(site).hostname or "")),
        site_fetch=site_fetch,
        progress=Progress(crawler, config.progress_interval),
        formats=("html",),
    )
    return Made(fetcher=fetcher_for(inputs, chunk), crawler=crawler, closed=closed, robots=robots)


async def finished(got: Made) -> None:
    """The crawl ends (awaited in the test's body): the fetcher's close, then the
    crawl's state and API client, as ``spider_closed`` and ``engine_stopped`` do."""
    await run(got.fetcher.close())
    manager = got.crawler.signals
    # Scrapy 2.13 has only the Deferred form; later ones deprecate it for this one.
    send_async = getattr(manager, "send_catch_log_async", None)
    for signal in (signals.spider_closed, signals.engine_stopped):
        if send_async is not None:
            await run(send_async(signal, reason="finished"))
        else:
            await manager.send_catch_log_deferred(signal, reason="finished")


def state(store: Any = None) -> SimpleNamespace:
    """What ``open`` is given of the crawl's state."""
    return SimpleNamespace(api_down=None, store=store)


def run(coroutine: Any) -> Any:
    """A coroutine of ours (it awaits asyncio futures) as a Deferred for the test."""
    return deferred_from_coro(coroutine)


async def drained(outputs: AsyncIterator[Any]) -> list[Any]:
    return [output async for output in outputs]


def response(request: Request, status: int = 200, body: str = "") -> TextResponse:
    return TextResponse(
        request.url, status=status, body=body.encode(), encoding="utf-8", request=request
    )


def html(text: str) -> str:
    return f"<html><head><title>t</title></head><body><main><p>{text}</p></main></body></html>"
