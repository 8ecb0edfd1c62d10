"""``SiteRedirectMiddleware``: redirects stay on the seed's site.

A page of the seed that answers 30x to another site must not be followed: the
other site's body would be stored (and exported) under the seed's URL, and a
hostile site could point the crawler at internal addresses. Redirects within the
site (``http`` to ``https``, ``example.com`` to ``www.example.com``) are followed
by Scrapy's RedirectMiddleware as usual; any other is refused here, before
RedirectMiddleware sees it, and the request fails with :class:`OffsiteRedirect`.

It acts on the crawls of spiders that have an ``increcrawl_scope`` (the
``incremental`` spider); other spiders keep Scrapy's own rules (``allowed_domains``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest

from increcrawl_scrapy import stats
from increcrawl_scrapy.scope import Scope, redirect_location

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: Before RedirectMiddleware (600) on the way back from the downloader.
PRIORITY = 650


class OffsiteRedirect(IgnoreRequest):
    """A redirect to another site, not followed."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__(f"redirect {status} to another site not followed: {location}")
        self.status = status
        self.location = location


class SiteRedirectMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SiteRedirectMiddleware:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        scope: Scope | None = getattr(self.crawler.spider, "increcrawl_scope", None)
        location = response.headers.get("Location")
        if scope is None or response.status not in REDIRECT_STATUSES or not location:
            return response
        target = redirect_location(request.url, location)
        if scope.follows_redirect(target):
            return response
        stats.inc(self.crawler.stats, stats.REDIRECT_OFFSITE)
        logger.warning("%s redirects to another site (%s): not followed", request.url, target)
        raise OffsiteRedirect(response.status, target)
