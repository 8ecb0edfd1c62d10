"""What a fetch's result does to a page's row and to the due queue: outcomes,
intervals, validators, errors and back-off, gone pages, the queue's order (StateStore
on its own, no crawl), for every pairing of policy and storage (conftest.py)."""

from __future__ import annotations

from increcrawl_scrapy.schedule.rows import Outcome
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.state.scenario import DAY, HOUR, SEED, discover


def test_not_modified_keeps_hash_and_updates_validators(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/v"
    discover(store, SEED, [url])
    store.record(url, 200, seed=SEED, content_hash="h", validators=('"e1"', None))
    clock.advance(DAY)
    got = store.record(url, 304, seed=SEED, validators=('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT"))
    assert got.outcome is Outcome.NOT_MODIFIED
    assert got.page.content_hash == "h"
    assert (got.page.etag, got.page.last_modified) == ('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT")
    assert got.page.interval_s == 1.5 * DAY
    # A 304 without validators (RFC 9110 allows it) keeps the stored ones.
    clock.advance(DAY)
    got = store.record(url, 304, seed=SEED, validators=(None, None))
    assert (got.page.etag, got.page.last_modified) == ('"e2"', "Tue, 01 Oct 2024 00:00:00 GMT")
    # A Geonode result (no validators) with the same content: they still describe it.
    clock.advance(2 * DAY)
    got = store.record(url, 200, seed=SEED, content_hash="h")
    assert got.page.etag == '"e2"'
    # New content the fetcher could not see validators for: the old ones are stale.
    clock.advance(2 * DAY)
    got = store.record(url, 200, seed=SEED, content_hash="h2")
    assert got.outcome is Outcome.CHANGED
    assert (got.page.etag, got.page.last_modified) == (None, None)


def test_errors_leave_the_schedule_untouched(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/e"
    discover(store, SEED, [url])
    before = store.record(url, 200, seed=SEED, content_hash="h").page
    clock.now = before.next_check
    for status in (500, 503, None, 403):
        got = store.record(url, status, seed=SEED)
        assert got.outcome is Outcome.ERROR
    after = store.get(url)
    assert after.error_count == 4
    assert (after.next_check, after.interval_s, after.content_hash, after.fetch_count) == (
        before.next_check,
        before.interval_s,
        before.content_hash,
        before.fetch_count,
    )
    assert [p.normalized_url for p in store.due(SEED)] == [url]


def test_changed_lastmod_makes_a_row_due_now(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/l"
    discover(store, SEED, [url], lastmod="2023-01-01")
    store.record(url, 200, seed=SEED, content_hash="h")
    clock.advance(HOUR)
    discover(store, SEED, [url], lastmod="2023-01-01")
    assert store.due(SEED) == []
    discover(store, SEED, [url], lastmod="2023-01-02")
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    assert store.get(url).sitemap_lastmod == "2023-01-02"


def test_a_gone_page_still_listed_is_rechecked_and_comes_back_as_new(
    store: StateStore, clock: Clock
) -> None:
    url = "https://example.com/g"
    discover(store, SEED, [url], lastmod="2023-01-01")
    store.record(url, 200, seed=SEED, content_hash="h")
    clock.advance(2 * DAY)
    assert store.record(url, 404, seed=SEED).outcome is Outcome.GONE
    clock.advance(HOUR)
    discover(store, SEED, [url], lastmod="2023-01-01")
    assert store.due(SEED) == []  # a slow re-check, not every run
    discover(store, SEED, [url], lastmod="2023-01-05")  # its date moved: at once
    assert [p.normalized_url for p in store.due(SEED)] == [url]
    back = store.record(url, 200, seed=SEED, content_hash="h")
    assert back.outcome is Outcome.NEW and back.page.gone is False
    assert back.page.interval_s == DAY and back.page.error_streak == 0


def test_a_gone_page_no_longer_listed_is_not_rechecked(store: StateStore, clock: Clock) -> None:
    url, other = "https://example.com/g", "https://example.com/o"
    discover(store, SEED, [url, other]).mark_missing()
    store.record(url, 410, seed=SEED)
    for _ in range(3):
        clock.advance(30 * DAY)
        discover(store, SEED, [other]).mark_missing()
        assert url not in {p.normalized_url for p in store.due(SEED)}
    assert store.get(url).gone and store.get(url).missing_runs == 3


def test_site_failures_back_off_and_api_failures_stay_due(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/f"
    discover(store, SEED, [url])
    waits = []
    for _ in range(4):
        got = store.record(url, 403, seed=SEED, site_failure=True)
        waits.append(got.page.next_check - clock.now)
        clock.now = got.page.next_check
    assert waits == [HOUR, 2 * HOUR, 4 * HOUR, 8 * HOUR]
    assert store.get(url).error_streak == 4
    for _ in range(3):  # the API or the transport failed: no evidence about the page
        assert store.record(url, None, seed=SEED).page.next_check == clock.now
    ok = store.record(url, 200, seed=SEED, content_hash="h").page
    assert ok.error_streak == 0 and ok.next_check == clock.now + DAY
    assert store.record(url, 500, seed=SEED, site_failure=True).page.next_check == (
        clock.now + HOUR  # the streak started over
    )


def test_queue_is_oldest_first_and_limited(store: StateStore, clock: Clock) -> None:
    urls = [f"https://example.com/{i}" for i in range(5)]
    discover(store, SEED, urls)
    for i, url in enumerate(urls):
        clock.advance(10)
        store.record(url, 200, seed=SEED, content_hash=str(i))
    clock.advance(2 * DAY)
    due = store.due(SEED, limit=3)
    assert [p.normalized_url for p in due] == urls[:3]


def test_record_for_an_undiscovered_url_inserts_it(store: StateStore) -> None:
    got = store.record("https://example.com/own?utm_medium=x", 200, seed="shop", content_hash="h")
    assert got.outcome is Outcome.NEW
    page = store.get("https://example.com/own")
    assert page.seed == "shop" and page.content_hash == "h"


def test_queued_rows_never_shadow_what_was_recorded(store: StateStore, clock: Clock) -> None:
    url = "https://example.com/q"
    discover(store, SEED, [url])
    [queued] = store.due(SEED)
    assert store.get(url) == queued  # a read leaves the queue cache as it was
    store.record(url, 200, seed=SEED, content_hash="h")
    store.flush()
    page = store.get(url)
    assert page.content_hash == "h" and page.fetch_count == 1  # not the queued copy
