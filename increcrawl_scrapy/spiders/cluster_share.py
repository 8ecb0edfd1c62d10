"""One crawl's share of what several crawls on a shared (PostgreSQL) state must
respect together: the Geonode plan's concurrency, and the politeness towards the
seed's host (DOWNLOAD_DELAY, CONCURRENT_REQUESTS_PER_DOMAIN).

Each crawl beats every BEAT seconds (``state/postgres/workers.py``) and sizes its own limits
from the live count: Geonode calls at once min(GEONODE_CONCURRENCY, plan / crawls on
the state); per host slot, the delay times the crawls on the seed and the concurrency
divided by them. No database round trip per request; when a crawl joins, the others
learn within one beat (a brief overshoot the API answers with 429s, retried). A new
crawl waits one beat before fetching, so that it starts with its share.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import deferred_from_coro

from increcrawl_scrapy import compat

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from increcrawl_scrapy.geonode.client import GeonodeClient
    from increcrawl_scrapy.state import StateStore

logger = logging.getLogger(__name__)

BEAT = 2.0  # seconds between heartbeats
#: Seconds between claims while other crawls on the state hold the rest of the queue.
SHARED_WAIT = 1.0


class ClusterShare:
    def __init__(
        self, crawler: Crawler, store: StateStore, seed: str, client: GeonodeClient | None
    ) -> None:
        self.crawler = crawler
        self.store = store
        self.seed = seed
        self.client = client
        self.delay = crawler.settings.getfloat("DOWNLOAD_DELAY")
        self.per_host = crawler.settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")
        self.own = client.limit if client is not None else 0
        self.plan: int | None = None
        self.crawls = (1, 1)  # on the seed, on the state
        self._loop: Any = None
        self._missed = 0  # beats in a row the state did not answer

    async def start(self) -> None:
        if self.client is not None:
            self.plan = await self.client.plan_limit()
        await self.beat()
        await compat.sleep(BEAT)  # the others' first beats are in: start with a share
        await self.beat()
        from twisted.internet import task

        self._loop = task.LoopingCall(lambda: deferred_from_coro(self.beat()))
        self._loop.start(BEAT, now=False)
        compat.connect_for_crawl(self.crawler, self.stop, signals.spider_closed)

    def stop(self, **_: Any) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    async def beat(self) -> None:
        if self.store.closed:  # the crawl closed its state before this loop
            self.stop()
            return
        try:
            crawls = await compat.in_thread(self.store.heartbeat, self.seed, 3 * BEAT)
        except Exception as exc:
            # The server is away (a restart): the next beat renews the leases; a
            # LoopingCall whose call fails stops for good, and the leases with it.
            if not self._missed:
                logger.warning("The heartbeat could not reach the state (%s): beating on", exc)
            self._missed += 1
            return
        if self._missed:
            logger.info("The heartbeat reached the state again after %d missed beats", self._missed)
            self._missed = 0
        if crawls != self.crawls:
            logger.info("%d crawls on this seed, %d on the state: limits shared", *crawls)
        self.crawls = crawls
        on_seed, total = crawls
        if self.client is not None and self.plan:
            await self.client.share(max(1, min(self.own, self.plan // total)))
        engine = self.crawler.engine
        downloader = getattr(engine, "downloader", None)
        for slot in getattr(downloader, "slots", {}).values():
            slot.delay = self.delay * on_seed
            slot.concurrency = max(1, self.per_host // on_seed)


async def share_if_shared(
    crawler: Crawler, store: StateStore, seed: str, client: GeonodeClient | None
) -> None:
    """Start sharing the cluster's limits when *store* is shared; else nothing."""
    if store.shared:
        await ClusterShare(crawler, store, seed, client).start()
