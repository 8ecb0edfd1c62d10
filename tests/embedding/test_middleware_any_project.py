"""The Geonode middleware in an ordinary spider of any project, without the pipeline."""

from __future__ import annotations

from typing import ClassVar

import pytest_twisted
import scrapy
from scrapy.crawler import Crawler
from scrapy.settings import Settings

from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.crawling import KEY


class PlainSpider(scrapy.Spider):
    name = "plain"
    seen: ClassVar[list] = []

    async def start(self):
        for url in self.urls:
            yield scrapy.Request(
                url,
                meta=self.meta,
                dont_filter=True,
                headers={"If-None-Match": self.etag} if self.etag else {},
            )

    def parse(self, response):
        self.seen.append(response)


def routed_settings(api: GeonodeStandIn, **extra: object) -> Settings:
    return Settings(
        {
            "DOWNLOADER_MIDDLEWARES": {"increcrawl_scrapy.geonode.GeonodeExtractMiddleware": 1000},
            "GEONODE_API_KEY": KEY,
            "GEONODE_API_URL": api.url,
            # No telnet port: another crawl on the machine may hold the default one.
            "TELNETCONSOLE_ENABLED": False,
            **extra,
        }
    )


@pytest_twisted.ensureDeferred
async def test_routes_requests_and_keeps_their_identity() -> None:
    with SampleSite(pages=4) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        settings = routed_settings(api, ROBOTSTXT_OBEY=True, HTTPERROR_ALLOW_ALL=True)
        PlainSpider.seen = []
        crawler = Crawler(PlainSpider, settings)
        urls = [site.page_url(0), site.page_url(2)]
        await crawler.crawl(urls=urls, meta={"geonode": {"render_js": False}}, etag=site.etag(0))
        by_url = {r.url: r for r in PlainSpider.seen}
        assert set(by_url) == set(urls)
        not_modified, page = by_url[site.page_url(0)], by_url[site.page_url(2)]
        assert not_modified.status == 304  # the conditional header reached the origin
        # An ordinary spider gets HTML by default: its callbacks use selectors.
        assert page.status == 200 and page.css("h1::text").get() == "Page 2"
        assert "geonode" in page.flags
        assert page.meta["geonode_api_response"]["metadata"]["http_status"] == 200
        bodies = [b["body"] for b in api.counters()["bodies"]]
        assert {"If-None-Match": site.etag(0)} in [b.get("headers") for b in bodies]
        assert all(b["formats"] == ["html"] for b in bodies)
        # robots.txt went to the site itself (the stand-in fetches no robots.txt
        # for extracts), never through the API.
        assert site.requested["/robots.txt"] == 1
        assert all("robots.txt" not in b["url"] for b in bodies)


@pytest_twisted.ensureDeferred
async def test_meta_geonode_false_skips_the_api() -> None:
    with SampleSite(pages=2) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        settings = routed_settings(api)
        PlainSpider.seen = []
        crawler = Crawler(PlainSpider, settings)
        await crawler.crawl(urls=[site.page_url(1)], meta={"geonode": False}, etag=None)
        assert PlainSpider.seen[0].text.startswith("<!doctype html>")
        assert "geonode" not in PlainSpider.seen[0].flags
        assert api.counters()["requests"] == {}
