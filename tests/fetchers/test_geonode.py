"""The Geonode fetchers alone, against the stand-in API: one extract per page (the
request the middleware routes), and batch jobs for a chunk's plain rows."""

from __future__ import annotations

import logging

import pytest
import pytest_twisted
from twisted.internet import reactor, task

from increcrawl_scrapy import stats
from increcrawl_scrapy.spiders.fetchers import BatchGeonodeFetcher, GeonodeFetcher
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.crawling import KEY
from tests.fetchers.support import drained, finished, made, page, run, state


@pytest.fixture
def servers():
    with SampleSite(pages=6) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        yield site, api


@pytest_twisted.ensureDeferred
async def test_extracts_one_request_a_page_while_the_tokens_last(
    servers, tmp_path, clock, caplog
) -> None:
    site, api = servers
    caplog.set_level(logging.INFO)
    # No chunk can hold GEONODE_BATCH_MIN_URLS rows: never a batch job.
    got = made(tmp_path, clock, api, chunk=10, INCRECRAWL_MAX_TOKENS=2)
    fetcher = got.fetcher
    assert type(fetcher) is GeonodeFetcher
    fetcher.announce()
    assert f"Fetching pages through the Geonode API at {api.url}" in caplog.text
    opened = state()
    assert await run(fetcher.open(opened)) is True
    assert opened.api_down is not None and fetcher.client is not None
    tokens = fetcher.budget(None)
    assert tokens.limit == 2
    due = [page(url) for url in site.page_urls()[:3]]
    requests = await run(drained(fetcher.fetch(due)))
    assert [r.url for r in requests] == [p.url for p in due[:2]]
    assert fetcher.out_of_tokens  # the third stays due
    assert api.counters()["requests"] == {"GET /v1/usage/concurrency": 1}  # pages: the middleware's
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_an_unusable_key_closes_the_crawl_at_open(servers, tmp_path, clock) -> None:
    _, api = servers
    api.configure(api_keys=["another-key"])
    got = made(tmp_path, clock, api)
    assert await run(got.fetcher.open(state())) is False
    assert got.closed and got.closed[0][0]  # a close reason, said once
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_plain_rows_go_in_a_batch_job_and_robots_txt_is_read_for_it(
    servers, tmp_path, clock
) -> None:
    site, api = servers
    got = made(
        tmp_path,
        clock,
        api,
        site=site.url,
        robots_txt="User-agent: *\nDisallow: /page/4\n",
        GEONODE_BATCH_MIN_URLS=3,
        ROBOTSTXT_OBEY=True,
    )
    fetcher = got.fetcher
    assert isinstance(fetcher, BatchGeonodeFetcher)
    await run(fetcher.open(state()))
    tokens = fetcher.budget(None)
    urls = site.page_urls()
    conditional = page(urls[0], etag='"v1"')  # validators: one by one
    plain = [page(url) for url in urls[1:5]]
    outputs = await run(drained(fetcher.fetch([conditional, *plain])))
    requests = [o for o in outputs if not isinstance(o, dict)]
    items = [o for o in outputs if isinstance(o, dict)]
    assert [r.url for r in requests] == [conditional.url]
    disallowed = [p.url for p in plain if "/page/4" in p.url]
    assert disallowed and got.robots == [f"{site.url}/robots.txt"]
    assert {i["url"] for i in items} == {p.url for p in plain} - set(disallowed)
    assert all(i["fetcher"] == "geonode-batch" and i["markdown"] for i in items)
    assert api.counters()["requests"].get("POST /v1/batch") == 1
    assert tokens.queued == 1 + len(items) and tokens.answered == len(items)
    assert not fetcher.jobs.active  # the job is done: nothing to cancel at close
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_a_batch_is_cut_to_the_tokens_left(servers, tmp_path, clock) -> None:
    site, api = servers
    got = made(tmp_path, clock, api, GEONODE_BATCH_MIN_URLS=3, INCRECRAWL_MAX_TOKENS=2)
    fetcher = got.fetcher
    await run(fetcher.open(state()))
    fetcher.budget(None)
    items = await run(drained(fetcher.fetch([page(url) for url in site.page_urls()[:4]])))
    assert len(items) == 2 and fetcher.out_of_tokens
    await finished(got)


@pytest_twisted.ensureDeferred
async def test_a_job_under_way_is_cancelled_at_close(servers, tmp_path, clock) -> None:
    site, api = servers
    api.configure(batch_stall=True)  # the job stays "processing"
    got = made(tmp_path, clock, api, GEONODE_BATCH_MIN_URLS=2)
    fetcher = got.fetcher
    await run(fetcher.open(state()))
    fetcher.budget(None)
    fetching = run(drained(fetcher.fetch([page(url) for url in site.page_urls()[:3]])))
    for _ in range(200):  # submitted within 10 s
        if fetcher.jobs.active:
            break
        await task.deferLater(reactor, 0.05)
    assert fetcher.jobs.active
    await run(fetcher.close())  # the crawl stops: so does the job, and its charges
    assert api.counters()["requests"].get("DELETE /v1/batch/{job_id}") == 1
    assert got.crawler.stats.get_value(stats.BATCH_CANCELLED) == 1
    assert await fetching == []  # its pages stay due
    await finished(got)
