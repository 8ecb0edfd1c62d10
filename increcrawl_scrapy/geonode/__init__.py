"""The Geonode Scraper API: client, request/response mapping, downloader middleware."""

from increcrawl_scrapy.geonode.errors import (
    GeonodeApiError,
    GeonodeBadAnswer,
    GeonodeError,
    GeonodeFatalError,
    GeonodeNoContent,
    GeonodeRetriesExhausted,
)
from increcrawl_scrapy.geonode.middleware import GeonodeExtractMiddleware

__all__ = [
    "GeonodeApiError",
    "GeonodeBadAnswer",
    "GeonodeError",
    "GeonodeExtractMiddleware",
    "GeonodeFatalError",
    "GeonodeNoContent",
    "GeonodeRetriesExhausted",
]
