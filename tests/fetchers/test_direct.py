"""The direct fetcher alone: Scrapy's own request per due page, nothing paid."""

from __future__ import annotations

import logging

import pytest_twisted
from twisted.internet.error import ConnectionRefusedError
from twisted.python.failure import Failure

from increcrawl_scrapy.spiders.fetchers import DirectFetcher
from tests.fetchers.support import drained, made, page, response, run, state


@pytest_twisted.ensureDeferred
async def test_each_due_page_is_its_own_request_as_the_spider_made_it(
    tmp_path, clock, caplog
) -> None:
    caplog.set_level(logging.INFO)
    got = made(tmp_path, clock)
    fetcher = got.fetcher
    assert isinstance(fetcher, DirectFetcher) and fetcher.client is None
    fetcher.announce()
    assert "Fetching pages directly with Scrapy (INCRECRAWL_FETCHER=direct" in caplog.text
    assert await run(fetcher.open(state())) is True
    assert await run(fetcher.month_share(None)) is None  # nothing paid: no share
    tokens = fetcher.budget(None)
    assert tokens.limit is None and not fetcher.free_answers
    due = [page("/a"), page("/b", etag='"v1"')]
    requests = await run(drained(fetcher.fetch(due)))
    assert [r.url for r in requests] == [p.url for p in due]
    assert requests[1].headers[b"If-None-Match"] == b'"v1"'  # the validators kept
    assert tokens.queued == 2 and not fetcher.out_of_tokens
    assert got.robots == []  # robots.txt is RobotsTxtMiddleware's, per request


@pytest_twisted.ensureDeferred
async def test_answers_and_failures_are_the_spiders(tmp_path, clock) -> None:
    fetcher = made(tmp_path, clock).fetcher
    [request] = await run(drained(fetcher.fetch([page("/a")])))
    answer = response(request)

    async def outputs(of):
        yield {"url": of.url}

    assert await run(drained(fetcher.answered(answer, outputs))) == [{"url": request.url}]
    item = {"url": request.url, "http_status": 200}
    assert await run(fetcher.item(answer, item)) is item
    failure = Failure(ConnectionRefusedError())
    failure.request = request
    assert await run(fetcher.failed(failure)) is None  # reported, not asked again
    await run(fetcher.close())
