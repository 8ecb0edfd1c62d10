"""What a fetcher does for the incremental spider (``INCRECRAWL_FETCHER``): the
spider keeps the phases of a run (discovery, the due rows, chunk by chunk); the
crawl's one fetcher turns each chunk into what Scrapy is handed (page requests,
or a batch job's items), says how a page's answer comes back, and spends tokens.

One fetcher per crawl (``fetcher_for``); hybrid fetching decides per host within
its own (``host_fetchers.py``).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from increcrawl_scrapy.spiders.tokens import TokenBudget

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Request, Response
    from scrapy.statscollectors import StatsCollector
    from twisted.python.failure import Failure

    from increcrawl_scrapy.config import IncrecrawlConfig
    from increcrawl_scrapy.crawl.shared_state import CrawlState
    from increcrawl_scrapy.geonode.client import GeonodeClient
    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.schedule.token_plan import MonthShare
    from increcrawl_scrapy.spiders.page_content import PageContent
    from increcrawl_scrapy.spiders.progress import Progress
    from increcrawl_scrapy.spiders.site_fetch import SiteFetch
    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

#: What the spider makes of a page's response: its items (or requests).
Outputs = Callable[["Response"], AsyncIterator[Any]]


@dataclass
class FetchInputs:
    """What a fetcher takes from the spider, named (not the spider's attributes)."""

    crawler: Crawler
    config: IncrecrawlConfig
    #: A due page's request as a direct fetch sends it (conditional, our callbacks).
    page_request: Callable[[PageState], Request]
    #: Whether a subclass's page rule takes *url* (its items are Geonode's, never a probe's).
    ruled: Callable[[str], bool]
    #: Ends the crawl: (close reason, why), said once.
    close: Callable[[str, str], None]
    content: PageContent  # a page's text, for batch results and probes
    site_fetch: SiteFetch  # robots.txt, for batch jobs (no RobotsTxtMiddleware there)
    progress: Progress
    formats: tuple[str, ...]  # what Geonode is asked for


class Fetcher(ABC):
    """The crawl's fetcher. The spider calls, in order: ``announce`` and ``open``
    at start; ``month_share`` and ``budget`` once the due set is known; ``fetch``
    for each chunk of due rows; ``answered``/``item``/``failed`` as pages come
    back; ``close`` when the crawl ends."""

    #: ``INCRECRAWL_FETCHER``'s word for it, once ``auto`` is resolved.
    kind: ClassVar[str]
    #: A page may cost nothing (a free probe answered it): the month's share does
    #: not cut the due set, and a page that does not fit waits for those under way.
    free_answers: ClassVar[bool] = False

    def __init__(self, inputs: FetchInputs) -> None:
        self.inputs = inputs
        self.config = inputs.config
        self.client: GeonodeClient | None = None  # the Geonode API's, when used
        self.tokens = TokenBudget(None, None)  # INCRECRAWL_MAX/MONTHLY_TOKENS, set by budget()
        #: Set when the budget stopped a chunk: the spider queues no more.
        self.out_of_tokens = False

    @property
    def stats(self) -> StatsCollector:
        return self.inputs.crawler.stats  # set once the crawl starts (after from_crawler)

    # -- at start --------------------------------------------------------------------

    @abstractmethod
    def announce(self) -> None:
        """Log how pages are fetched (the run's first lines)."""

    async def open(self, state: CrawlState) -> bool:
        """Ready to fetch; False if the crawl was closed instead (a dead API)."""
        return True

    async def month_share(self, store: StateStore) -> MonthShare | None:
        """This run's share of INCRECRAWL_MONTHLY_TOKENS: none when nothing is paid."""
        return None

    def budget(self, share: MonthShare | None) -> TokenBudget:
        """The run's token budget (no limit when nothing is paid), kept as ``tokens``."""
        self.tokens = TokenBudget(None, self.stats)
        return self.tokens

    # -- a chunk of due rows ---------------------------------------------------------

    async def fetch(self, due: list[PageState]) -> AsyncIterator[Any]:
        """What Scrapy is handed for *due*: one request per page while the budget
        allows (else ``out_of_tokens`` and nothing more)."""
        for page in due:
            if not await self.tokens.take_one():
                self.out_of_tokens = True
                return
            yield await self.request(page)

    async def request(self, page: PageState) -> Request:
        return self.inputs.page_request(page)

    # -- answers ---------------------------------------------------------------------

    def answered(self, response: Response, outputs: Outputs) -> AsyncIterator[Any]:
        """What a page's *response* yields: the spider's *outputs* of it."""
        return outputs(response)

    async def item(self, response: Response, item: dict[str, Any]) -> dict[str, Any]:
        """The item the spider made of *response*, as this fetcher reports it."""
        return item

    async def failed(self, failure: Failure) -> Request | None:
        """A request to send instead of reporting *failure*, or None."""
        return None

    async def close(self) -> None:
        """The crawl ends: stop what still runs."""
        return None
