"""``GeonodeExtractMiddleware``: fetch pages through ``POST /v1/extract``.

Install late in the chain (priority 1000, as the add-on does) so Scrapy's own
middlewares see the request before and the rebuilt response after, exactly as for
a direct download. Works in any Scrapy project with the asyncio reactor.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.config import config_for
from increcrawl_scrapy.geonode.client import client_for
from increcrawl_scrapy.geonode.errors import (
    GeonodeApiError,
    GeonodeBadAnswer,
    GeonodeFatalError,
    GeonodeNoContent,
)
from increcrawl_scrapy.geonode.payload import (
    build_response,
    extract_body,
    formats_for,
    is_routed,
    origin_status_answer,
)
from increcrawl_scrapy.signals import origin_answered, origin_asked

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

#: An answer without the content asked for is asked once more: a glitch of the API's
#: passes; one that lasts costs a token a try, so not GEONODE_MAX_RETRIES of them.
NO_CONTENT_RETRIES = 1


class GeonodeExtractMiddleware:
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> GeonodeExtractMiddleware:
        return cls(crawler)

    def __init__(self, crawler: Crawler) -> None:
        self.config = config_for(crawler)
        if not self.config.uses_geonode:
            raise NotConfigured(
                "no GEONODE_API_KEY (or INCRECRAWL_FETCHER='direct'): Scrapy fetches pages itself"
            )
        if not compat.asyncio_available():
            raise NotConfigured(
                "GeonodeExtractMiddleware needs TWISTED_REACTOR = "
                "'twisted.internet.asyncioreactor.AsyncioSelectorReactor'"
            )
        self.crawler = crawler
        self.client = client_for(crawler)  # the crawl's one client, shared with the spider
        logger.info("Routing page requests through the Geonode API at %s", self.config.api_url)
        self._closing = False

    async def process_request(
        self, request: Request, spider: Spider | None = None
    ) -> Response | None:
        if not is_routed(request):
            return None
        # Scrapy's downloader never sees this request: the run counts it by these
        # (asked, and failed unless the origin's answer follows).
        self._signal(origin_asked, request=request)
        formats = formats_for(self.config, self.crawler.spider)
        for tries_left in range(NO_CONTENT_RETRIES, -1, -1):
            answer = await self._extract(request, formats)
            try:
                response = build_response(request, answer, formats)
            except GeonodeNoContent as exc:
                # An answer without the page's content: asked once more (a token
                # each), then an error for the page, kept due, never an empty page.
                stats.inc(self.crawler.stats, stats.API_NO_CONTENT)
                if not tries_left:
                    logger.warning("Geonode answer for %s: %s; it stays due", request.url, exc)
                    raise
                logger.info("Geonode answer for %s: %s; asked again", request.url, exc)
            except GeonodeBadAnswer as exc:
                self._bad_answer(request, exc)
            else:
                self._signal(origin_answered, response=response, request=request)
                return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _signal(self, signal: object, **kwargs: Any) -> None:
        self.crawler.signals.send_catch_log(signal=signal, spider=self.crawler.spider, **kwargs)

    async def _extract(self, request: Request, formats: tuple[str, ...]) -> dict[str, Any]:
        try:
            return await self.client.extract(extract_body(request, self.config, formats))
        except GeonodeFatalError as exc:
            self._close(exc.reason, str(exc))
            raise IgnoreRequest(f"Geonode API unusable ({exc.reason})") from None
        except GeonodeApiError as exc:
            status = exc.origin_status()
            if status is None:
                raise
            return origin_status_answer(request, status, exc.body)
        except GeonodeBadAnswer as exc:
            self._bad_answer(request, exc)

    def _bad_answer(self, request: Request, exc: GeonodeBadAnswer) -> NoReturn:
        logger.warning("Geonode answer for %s is not the documented JSON: %s", request.url, exc)
        stats.inc(self.crawler.stats, stats.API_BAD_ANSWERS)
        raise exc

    def _close(self, reason: str, message: str) -> None:
        if self._closing:
            return
        self._closing = True
        logger.error("%s; closing the spider (%s)", message, reason)
        # Not awaited: closing waits for in-flight downloads, this one included.
        deferred_from_coro(compat.close_spider(self.crawler, reason))
