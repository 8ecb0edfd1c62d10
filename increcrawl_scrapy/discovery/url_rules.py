"""Which discovered URLs the crawl keeps, as Scrapy users write it for
``SitemapSpider`` (``sitemap_follow``) and ``LinkExtractor`` (``allow``, ``deny``):
regular expressions searched in the URL.

``INCRECRAWL_ALLOW`` / ``INCRECRAWL_DENY`` judge page URLs; ``INCRECRAWL_SITEMAP_FOLLOW``
judges the child sitemaps an index lists (the sitemaps given are always read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

#: Why a page URL is refused: counted as ``increcrawl/sitemap/skipped/<reason>``.
DENIED, NOT_ALLOWED = "denied", "not_allowed"


@dataclass(frozen=True)
class UrlRules:
    allow: tuple[re.Pattern[str], ...] = ()
    deny: tuple[re.Pattern[str], ...] = ()
    follow: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_config(cls, config: IncrecrawlConfig) -> UrlRules:
        # Validated by IncrecrawlConfig: these compile.
        return cls(
            allow=tuple(map(re.compile, config.allow)),
            deny=tuple(map(re.compile, config.deny)),
            follow=tuple(map(re.compile, config.sitemap_follow)),
        )

    def refuses(self, url: str) -> str | None:
        """Why the page *url* is not kept, or None. Deny wins over allow."""
        if any(pattern.search(url) for pattern in self.deny):
            return DENIED
        if self.allow and not any(pattern.search(url) for pattern in self.allow):
            return NOT_ALLOWED
        return None

    def follows(self, sitemap_url: str) -> bool:
        return not self.follow or any(pattern.search(sitemap_url) for pattern in self.follow)

    @property
    def active(self) -> bool:
        return bool(self.allow or self.deny)

    def digest_part(self) -> bytes:
        """What a sitemap's digest covers of these rules (a change re-reads them)."""
        parts = [p.pattern for p in self.allow], [p.pattern for p in self.deny]
        return repr(parts).encode("utf-8")
