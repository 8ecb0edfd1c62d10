"""Sitemaps and robots.txt, straight from the site (never through the API), for the
incremental spider's discovery; the redirects they answer with say what the seed's
site is (a bare name answering with a 301 to ``www.``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from scrapy.http import Request
from scrapy.http.request import NO_CALLBACK

from increcrawl_scrapy import compat
from increcrawl_scrapy.geonode.payload import META_PARAMS

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from increcrawl_scrapy.scope import Scope

logger = logging.getLogger(__name__)


class SiteFetch:
    """``await fetch(url, headers)``: the answer, or None (with a warning) when there
    is none."""

    def __init__(self, crawler: Crawler, max_bytes: int, scope: Scope) -> None:
        self.crawler = crawler
        self.max_bytes = max_bytes
        self.scope = scope

    async def __call__(self, url: str, headers: dict[str, str] | None = None) -> Response | None:
        request = Request(
            url,
            headers=headers,
            callback=NO_CALLBACK,
            dont_filter=True,
            meta={
                META_PARAMS: False,
                "download_maxsize": self.max_bytes,
                "download_warnsize": self.max_bytes,
            },
        )
        try:
            response = await compat.download(self.crawler, request)
        except Exception as exc:  # DNS, refused, too large, ignored by robots.txt...
            logger.warning("Could not fetch %s: %s", url, exc)
            return None
        if response.url != request.url and self.scope.adopt(response.url):
            # The site's pages are listed where it redirects, and are the seed's.
            logger.info(
                "%s redirects to %s: pages on %s are the seed's too",
                url,
                response.url,
                urlsplit(response.url).hostname,
            )
            if response.status == 304 and headers:
                # Not modified, but read last under a narrower site: read it whole.
                return await self(url)
        return response
