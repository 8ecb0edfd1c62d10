"""The hybrid fetcher alone: a free direct probe per page (one scout per host while
its verdict is out), Geonode's extraction when the probe says changed or gets no
answer; its requests and answers read without a crawl (crawls: tests/geonode)."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted
from scrapy.http import Request
from twisted.internet.error import ConnectionRefusedError
from twisted.python.failure import Failure

from increcrawl_scrapy import stats
from increcrawl_scrapy.spiders.fetchers import HybridFetcher
from increcrawl_scrapy.spiders.host_fetchers import EXTRACT, PROBE
from increcrawl_scrapy.spiders.hybrid_fetch import HybridFetch
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn
from tests.crawling import KEY
from tests.fetchers.support import (
    drained,
    finished,
    html,
    made,
    page,
    response,
    run,
    state,
)


@pytest.fixture
def hybrid(tmp_path, clock):
    with (
        GeonodeStandIn(api_keys=[KEY]) as api,
        StateStore(str(tmp_path / "hosts.sqlite"), clock=clock) as store,
    ):
        got = made(
            tmp_path, clock, api, ruled=["http://site.test/ruled"], INCRECRAWL_FETCHER="hybrid"
        )
        yield got, store


async def opened(got, store) -> HybridFetcher:
    fetcher = got.fetcher
    assert isinstance(fetcher, HybridFetcher) and fetcher.free_answers
    assert await run(fetcher.open(state(store))) is True
    fetcher.budget(None)
    return fetcher


@pytest_twisted.ensureDeferred
async def test_pages_are_probed_first_but_a_ruled_page_is_extracted(hybrid, caplog) -> None:
    got, store = hybrid
    caplog.set_level(logging.INFO)
    got.fetcher.announce()
    assert "with a direct probe first and, when they changed, through the Geonode" in caplog.text
    fetcher = await opened(got, store)
    # A ruled page is Geonode's, as the spider made it, and no scout of its host.
    [ruled] = await run(drained(fetcher.fetch([page("/ruled")])))
    assert HybridFetch.step(ruled.meta) is None and not ruled.headers
    assert fetcher.hybrid.hosts.scouting == set()
    [probe] = await run(drained(fetcher.fetch([page("/a", content_hash="h", etag='"v1"')])))
    assert HybridFetch.step(probe.meta) == PROBE and probe.meta["dont_retry"]
    assert probe.headers[b"If-None-Match"] == b'"v1"'  # conditional: a 304 is free
    assert fetcher.hybrid.hosts.scouting == {"site.test"}  # the host's verdict is out
    counted = got.crawler.stats.get_stats()
    assert counted[stats.HYBRID_PROBES] == 1
    assert counted[stats.HYBRID_EXTRACTIONS.format(reason="rule")] == 1
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_a_304_is_the_item_and_costs_nothing(hybrid) -> None:
    got, store = hybrid
    fetcher = await opened(got, store)
    [probe] = await run(drained(fetcher.fetch([page("/a", content_hash="h", etag='"v1"')])))

    async def ours(of):  # the spider's outputs: never for a probe
        raise AssertionError(of)
        yield

    [item] = await run(drained(fetcher.answered(response(probe, 304), ours)))
    assert item["http_status"] == 304 and item["url"] == probe.url
    assert fetcher.tokens.answered == 1 and fetcher.tokens.spent == 0
    assert fetcher.hybrid.hosts.hosts["site.test"].mode == PROBE
    assert got.crawler.stats.get_value(stats.HYBRID_SAVED) == 1
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_a_changed_page_is_extracted_and_geonode_s_item_compared(hybrid) -> None:
    got, store = hybrid
    fetcher = await opened(got, store)
    [probe] = await run(drained(fetcher.fetch([page("/a", content_hash="old")])))
    body = html("A page that changed since its stored fingerprint, with words enough.")
    [extraction] = await run(drained(fetcher.answered(response(probe, 200, body), None)))
    assert isinstance(extraction, Request)
    assert HybridFetch.step(extraction.meta) == "extract"
    assert got.crawler.stats.get_value(stats.HYBRID_EXTRACTIONS.format(reason="changed")) == 1
    # Geonode's answer comes back through the spider's outputs, then the comparison.
    answer = response(extraction, 200, body)
    item = {"url": extraction.url, "http_status": 200, "markdown": None}

    async def ours(of):
        yield await fetcher.item(of, {**item, "markdown": "a different text entirely"})

    [kept] = await run(drained(fetcher.answered(answer, ours)))
    assert kept["fetcher"] == "hybrid" and kept["etag"] is None  # differed: no validators
    assert fetcher.hybrid.hosts.hosts["site.test"].mode == EXTRACT
    assert fetcher.hybrid.hosts.scouting == set()  # released: the host's pages go on
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_a_probe_without_an_answer_asks_geonode(hybrid) -> None:
    got, store = hybrid
    fetcher = await opened(got, store)
    [probe] = await run(drained(fetcher.fetch([page("/a", content_hash="h")])))
    failure = Failure(ConnectionRefusedError())
    failure.request = probe
    extraction = await run(fetcher.failed(failure))
    assert HybridFetch.step(extraction.meta) == "extract"
    assert fetcher.hybrid.hosts.hosts["site.test"].reason == "failed"
    plain = Failure(ConnectionRefusedError())
    plain.request = Request("http://site.test/other")  # not a probe: the spider reports it
    assert await run(fetcher.failed(plain)) is None
    await finished(got)
