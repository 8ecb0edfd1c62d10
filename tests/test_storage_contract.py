"""The storage interface every backend implements (docs/architecture.md, "Plugging
in"). Each test runs against every backend in BACKENDS; a new backend joins the
fixture and must pass them all. SQLite-only behaviour (file lock, WAL, crash
safety) is tested in test_state.py."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from increcrawl_scrapy.rows import Outcome
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.state.contents import last_change
from increcrawl_scrapy.urls import normalize_url
from tests.conftest import Clock

SEED = "https://example.com/sitemap.xml"
OTHER = "https://example.com/robots.txt"
DAY = 86_400.0

BACKENDS = ["sqlite", "postgresql"]
Factory = Callable[..., StateStore]


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock):
    opened: list[StateStore] = []
    where = (
        request.getfixturevalue("postgres_dsn")
        if request.param == "postgresql"
        else str(tmp_path / "contract.sqlite")
    )

    def factory(**options: Any) -> StateStore:
        store = StateStore(where, clock=clock, flush_items=1000, **options)
        opened.append(store)
        return store

    yield factory
    for store in opened:
        store.close()


def urls(n: int) -> list[str]:
    return [f"https://example.com/p{i:03d}" for i in range(n)]


def test_the_queue_hands_out_chunks_in_its_stored_order(open_store: Factory) -> None:
    store = open_store()
    run = store.start_run(SEED)
    assert run.upsert([(u, None) for u in urls(10)]) == 10
    chunks = list(store.due_chunks(SEED, size=3))
    assert [len(c) for c in chunks] == [3, 3, 3, 1]
    flat = [page.normalized_url for chunk in chunks for page in chunk]
    assert flat == urls(10)
    # Rows handed out and never answered are handed out again once their reader has
    # closed (a shared backend leases them to it until then).
    store.close()
    again = open_store()
    assert [page.normalized_url for page in again.due(SEED)] == urls(10)
    again.close()
    limited = list(open_store().due_chunks(SEED, limit=5, size=3))
    assert [len(c) for c in limited] == [3, 2]


def test_a_row_is_handed_out_once_while_its_reader_holds_it(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(4)])
    held = store.due(SEED)
    other = open_store()
    # SQLite: one crawl a file, so whoever reads gets the rows; a shared backend
    # (PostgreSQL) never hands a leased row to another reader.
    expected = [] if other.database.dialect != "sqlite" else urls(4)
    assert [page.normalized_url for page in other.due(SEED)] == expected
    assert len(held) == 4


def test_a_chunk_is_read_when_the_previous_one_is_used(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(6)])
    chunks = store.due_chunks(SEED, size=2)
    first = next(chunks)
    for page in first:  # recorded before the next chunk is read: not handed out again
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
    rest = [page.normalized_url for chunk in chunks for page in chunk]
    assert rest == urls(6)[2:]


def test_results_are_recorded_by_key_with_an_optional_lease(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([("https://example.com/a/", None)])
    [page] = store.due(SEED)
    got = store.record(
        "https://elsewhere.example/final",
        200,
        seed=SEED,
        key=page.normalized_url,
        content_hash="h",
        lease="token-1",
    )
    assert got.outcome is Outcome.NEW and got.page.normalized_url == page.normalized_url
    assert store.count() == 1 and store.due(SEED) == []


def test_a_held_result_is_written_only_once_delivered(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(2)])
    kept, dropped = store.due(SEED)
    for page in (kept, dropped):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h", hold=True)
    assert store.get(kept.url).last_fetched is not None  # the held result is the row now
    store.flush()
    store.deliver(kept.normalized_url)
    assert store.discard(dropped.normalized_url) is True
    store.close()
    reopened = open_store()
    assert reopened.get(kept.url).content_hash == "h"
    assert reopened.get(dropped.url).last_fetched is None  # not delivered: due again
    assert [p.normalized_url for p in reopened.due(SEED)] == [dropped.normalized_url]


def test_held_results_are_not_written_at_close(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(1)])
    [page] = store.due(SEED)
    store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h", hold=True)
    store.close()
    assert open_store().get(page.url).last_fetched is None


def test_missing_marking_counts_only_the_runs_seed(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(3)])
    store.start_run(OTHER).upsert([("https://example.com/other", None)])
    for n in (1, 2, 3):
        clock.advance(DAY)
        run = store.start_run(SEED)
        run.upsert([(u, None) for u in urls(2)])
        result = run.mark_missing()
        assert (result.marked, result.due) == (1, 1 if n == 3 else 0)
    assert store.get("https://example.com/other").missing_runs == 0


def test_a_row_belongs_to_the_seed_that_listed_it_last(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(2)])
    store.start_run(OTHER).upsert([(u, None) for u in urls(2)])
    assert store.due(SEED) == [] and len(store.due(OTHER)) == 2


def test_gone_rows_still_listed_come_back_into_the_queue(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(1)])
    [page] = store.due(SEED)
    store.record(page.url, 404, seed=SEED, key=page.normalized_url)
    assert store.due(SEED) == []
    clock.advance(2 * DAY)
    assert [p.gone for p in store.due(SEED)] == [True]


def test_runs_are_finished_with_their_counts(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    clock.advance(3)
    run.finish({"new": 2, "tokens_charged": 5}, discovery_complete=False, close_reason="shutdown")
    [row] = store.runs(SEED)
    assert (row["new"], row["tokens_charged"], row["discovery_complete"]) == (2, 5, 0)
    assert row["finished_at"] - row["started_at"] == 3 and row["close_reason"] == "shutdown"


def test_date_moves_are_judged_even_when_the_caller_forgets(
    open_store: Factory, clock: Clock
) -> None:
    store = open_store()
    [url] = urls(1)
    run = store.start_run(SEED)
    run.upsert([(url, "2020-01-01T00:00:00Z")])
    [page] = store.due(SEED)
    store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
    run.finish({}, discovery_complete=True)
    clock.advance(3600)
    run = store.start_run(SEED)
    run.upsert([(url, "2020-02-01T00:00:00Z")])  # moved; apply_lastmod() never called
    run.finish({}, discovery_complete=True)
    assert [p.normalized_url for p in store.due(SEED)] == [url]


def test_dates_in_the_future_are_counted_per_host(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    ahead = "2999-01-01T00:00:00Z"
    run.upsert([(u, ahead) for u in urls(3)])
    run.upsert([("https://example.com/later", ahead)])  # the host's count goes up
    assert store.lastmod_verdicts(SEED)[0]["future_dates"] == 4
    assert all(page.sitemap_lastmod != ahead for page in store.due(SEED))  # clamped


def test_rows_seen_again_take_their_date_and_sitemap(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    a, b, feed = (f"https://example.com/{name}" for name in ("a.xml", "b.xml", "feed"))
    one, two = urls(2)
    run = store.start_run(SEED)
    run.upsert([(one, "2020-01-01T00:00:00Z")], sitemap_url=a)
    run.upsert([(two, None)], sitemap_url=feed, feed=True)
    run.finish({}, discovery_complete=True)
    clock.advance(DAY)
    run = store.start_run(SEED)
    run.upsert([(one, "2999-01-01T00:00:00Z")], sitemap_url=b)  # a date in the future
    run.upsert([(one, None), (two, "2021-01-01T00:00:00Z")], sitemap_url=feed, feed=True)
    run.finish({}, discovery_complete=True)
    first, second = store.get(one), store.get(two)
    assert first is not None and second is not None
    assert (first.sitemap_url, first.sitemap_lastmod) == (b, "2020-01-01T00:00:00Z")
    assert (first.last_seen, first.missing_runs) == (clock.now, 0)
    assert (second.sitemap_url, second.sitemap_lastmod) == (feed, "2021-01-01T00:00:00Z")


def test_two_stores_add_their_host_evidence_up(open_store: Factory, clock: Clock) -> None:
    # Two workers at once, each observing ten pages whose date moved and which
    # changed: the host's stored evidence is their sum (increments, not the absolute
    # counts each worker had in memory), and the verdict is the stored totals'.
    first, second = open_store(), open_store()
    pages = urls(20)
    run = first.start_run(SEED)
    run.upsert([(u, "2020-01-01T00:00:00Z") for u in pages])
    for page in first.due(SEED):
        first.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="v0")
    run.finish({}, discovery_complete=True)
    clock.advance(DAY)
    run = first.start_run(SEED)
    run.upsert([(u, f"2020-02-{at + 1:02d}T00:00:00Z") for at, u in enumerate(pages)])
    assert run.apply_lastmod().moved == 20  # each its own date: no wave
    run.finish({}, discovery_complete=True)
    first.flush()
    for store, share in ((first, pages[:10]), (second, pages[10:])):
        for url in share:
            store.record(url, 200, seed=SEED, key=url, content_hash="v1")
    first.flush()
    second.flush()
    (row,) = first.lastmod_verdicts(SEED)
    assert (row["moved_changed"], row["verdict"]) == (20, "trusted")
    third = open_store()
    assert third.hosts.verdict("example.com") == "trusted"


def test_two_stores_recording_the_same_new_page_both_go_on(open_store: Factory) -> None:
    # A URL no discovery listed (a redirect's target, an item row), recorded by two
    # workers at once: the second insert meets the first's row and becomes an update;
    # neither store stops writing.
    first, second = open_store(), open_store()
    shared_key, other = "https://example.com/new", "https://example.com/after"
    first.record(shared_key, 200, seed=SEED, key=shared_key, content_hash="a")
    second.record(shared_key, 200, seed=SEED, key=shared_key, content_hash="b")
    assert first.flush() == 1
    assert second.flush() == 1
    second.record(other, 200, seed=SEED, key=other, content_hash="c")
    assert second.flush() == 1
    third = open_store()
    assert third.get(shared_key).content_hash == "b"
    assert third.get(other).content_hash == "c"
    assert third.count() == 2


def test_rekeying_keeps_item_rows_and_kept_contents(open_store: Factory, clock: Clock) -> None:
    # A normalization change that moves a page's key: its item rows
    # (INCRECRAWL_ITEM_KEY, ``PAGE#item:KEY``) move with it rather than merging into
    # the page's row, and the texts kept for both move to their new keys.
    def opened(strip: bool) -> StateStore:
        return open_store(
            normalize=partial(normalize_url, strip_trailing_slash=strip),
            normalization={"strip_trailing_slash": strip},
        )

    page, plain = "https://example.com/docs/", "https://example.com/a"
    store = opened(False)
    store.start_run(SEED).upsert([(page, None), (plain, None)])
    item = f"{page}#item:42"
    for key, text in ((page, "the page"), (item, "the item"), (plain, "another page")):
        url = plain if key == plain else page
        store.record(url, 200, seed=SEED, key=key, content_hash=text, content=text)
    store.close()
    store = opened(True)
    assert store.rekeyed.rekeyed == 2  # the page and its item row
    moved, moved_item = "https://example.com/docs", "https://example.com/docs#item:42"
    assert store.count() == 3
    assert store.get(moved).content_hash == "the page"
    assert store.results.lookup(moved_item).content_hash == "the item"
    for key, text in ((moved, "the page"), (moved_item, "the item"), (plain, "another page")):
        kept = last_change(store.database, key)
        assert kept is not None and kept.text == text, key
    rows = store.database.execute("SELECT count(*) FROM contents").fetchone()
    assert rows[0] == 3
