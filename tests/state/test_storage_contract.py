"""The storage interface every backend implements (docs/architecture.md, "Plugging
in"). Each test runs against every backend in BACKENDS, with two stores open at once
at least (a bystander opened first, which works on the state after the test's own
stores did); a new backend joins the fixture and must pass them all. Every named
statement of ``state/statements.py`` is run on every backend by these tests (the
last one checks). SQLite-only behaviour (file lock, WAL, crash safety) is tested in
test_sqlite_database.py and test_sqlite_locking.py."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from increcrawl_scrapy.commands.report import gather
from increcrawl_scrapy.commands.state import _status
from increcrawl_scrapy.schedule.policy import LearnedPolicy
from increcrawl_scrapy.schedule.rows import Outcome
from increcrawl_scrapy.state import StateStore, held_item_key
from increcrawl_scrapy.state.contents import last_change
from increcrawl_scrapy.state.hosts import write_hosts
from increcrawl_scrapy.state.lastmod import LastmodRules
from increcrawl_scrapy.state.postgres import database as postgres
from increcrawl_scrapy.state.sqlite import database as sqlite
from increcrawl_scrapy.state.statements import names
from increcrawl_scrapy.urls import normalize_url
from tests.conftest import Clock

SEED = "https://example.com/sitemap.xml"
OTHER = "https://example.com/robots.txt"
DAY = 86_400.0

BYSTANDER = "https://bystander.example/sitemap.xml"

BACKENDS = ["sqlite", "postgresql"]
Factory = Callable[..., StateStore]
#: Per backend, the statements these tests ran (their text).
RAN: dict[str, set[str]] = {backend: set() for backend in BACKENDS}
_SESSIONS = {"sqlite": sqlite.Database, "postgresql": postgres.Connection}


@pytest.fixture(scope="module", autouse=True)
def statements_ran() -> Any:
    """Every statement a backend's connection runs, recorded for the last test."""
    patch = pytest.MonkeyPatch()
    for backend, session in _SESSIONS.items():
        for method in ("execute", "executemany", "tuples", "fill"):
            original = getattr(session, method)

            def recording(self: Any, sql: str, *args: Any, _run: Any = original, _b=backend):
                RAN[_b].add(sql)
                return _run(self, sql, *args)

            patch.setattr(session, method, recording)
    yield RAN
    patch.undo()


@pytest.fixture(params=BACKENDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock):
    opened: list[StateStore] = []
    where = (
        request.getfixturevalue("postgres_dsn")
        if request.param == "postgresql"
        else str(tmp_path / "contract.sqlite")
    )
    # Open through the whole test: every test runs with two stores open at once.
    bystander = StateStore(where, clock=clock, flush_items=1000)

    def factory(**options: Any) -> StateStore:
        store = StateStore(where, clock=clock, flush_items=1000, **options)
        opened.append(store)
        return store

    yield factory
    live = [store for store in opened if not store.database.closed]
    if live:  # it sees what the test's stores wrote...
        assert bystander.count() == live[-1].count()
    # ...and works beside them: a run of its own seed, its page fetched and written.
    run = bystander.start_run(BYSTANDER)
    run.upsert([("https://bystander.example/page", None)])
    [page] = bystander.due(BYSTANDER)
    bystander.record(page.url, 200, seed=BYSTANDER, key=page.normalized_url, content_hash="b")
    bystander.flush()
    run.finish({"new": 1}, discovery_complete=True)
    for store in live:
        assert store.get("https://bystander.example/page").content_hash == "b"
    bystander.close()
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


def test_an_undelivered_result_is_written_only_once_delivered(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(2)])
    kept, dropped = store.due(SEED)
    for page in (kept, dropped):
        store.record(
            page.url,
            200,
            seed=SEED,
            key=page.normalized_url,
            content_hash="h",
            until_delivered=True,
        )
    assert store.get(kept.url).last_fetched is not None  # the undelivered result is the row now
    store.flush()
    store.deliver(kept.normalized_url)
    assert store.discard(dropped.normalized_url) is True
    store.close()
    reopened = open_store()
    assert reopened.get(kept.url).content_hash == "h"
    assert reopened.get(dropped.url).last_fetched is None  # not delivered: due again
    assert [p.normalized_url for p in reopened.due(SEED)] == [dropped.normalized_url]


def test_undelivered_results_are_not_written_at_close(open_store: Factory) -> None:
    store = open_store()
    store.start_run(SEED).upsert([(u, None) for u in urls(1)])
    [page] = store.due(SEED)
    store.record(
        page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h", until_delivered=True
    )
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
    # A feed's date is a signal, never the row's date (the feed drops the item later).
    assert (second.sitemap_url, second.sitemap_lastmod) == (feed, None)


def test_a_feed_date_after_the_last_fetch_makes_its_page_due(
    open_store: Factory, clock: Clock
) -> None:
    store = open_store()
    feed = "https://example.com/feed/atom/"
    one, two, three = urls(3)
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in (one, two, three)])
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
    run.finish({}, discovery_complete=True)
    fetched = clock.now
    clock.advance(600)  # none is due by its interval yet
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in (one, two, three)])
    run.upsert(
        [
            (one, _iso(fetched + 60)),  # edited since the last fetch
            (two, _iso(fetched - 60)),  # edited before it
            (three, _iso(fetched)[:10]),  # a date only, that day's: not after the fetch
        ],
        sitemap_url=feed,
        feed=True,
    )
    run.finish({}, discovery_complete=True)
    assert [page.url for page in store.due(SEED)] == [one]
    assert all(store.get(u).sitemap_lastmod is None for u in (one, two, three))  # type: ignore[union-attr]


def _iso(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


def test_pages_scheduled_before_a_host_earns_trust_wait_for_their_dates(
    open_store: Factory, clock: Clock
) -> None:
    # Fetched while the host was judged, each page was given the schedule's early
    # check; once its dates earn trust (in the batch of the fetches that earned it),
    # the pages whose dates stand still wait for them, the fetched ones included.
    store = open_store(policy=LearnedPolicy(), lastmod=LastmodRules(min_evidence=20, sample=0.0))
    pages = urls(10)
    run = store.start_run(SEED)
    run.upsert([(u, "2020-01-01T00:00:00Z") for u in pages])
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="v0")
    run.finish({}, discovery_complete=True)
    store.flush()
    assert store.get(pages[9]).next_check <= clock.now + 2 * DAY
    clock.advance(DAY)
    run = store.start_run(SEED)
    run.upsert([(u, f"2020-02-0{at + 1}T00:00:00Z") for at, u in enumerate(pages[:4])])
    assert run.apply_lastmod().moved == 4
    for url in pages[:4]:
        store.record(url, 200, seed=SEED, key=url, content_hash="v1")
    run.finish({}, discovery_complete=True)
    store.flush()
    (row,) = store.lastmod_verdicts(SEED)
    assert (row["moved_changed"], row["verdict"]) == (4, "trusted")
    for url in pages:
        page = store.get(url)
        assert page.next_check - page.last_fetched > 650 * DAY, url


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


def test_held_items_are_kept_for_the_next_run(open_store: Factory) -> None:
    # Items whose verdict waits for a later run (pages/pending.py): a row each,
    # kept across a close; two stores open at once (two crawls) each add and delete
    # their own, never writing back another's.
    page = "https://example.com/page/2"
    first_key, second_key = held_item_key(page, "gone", "a"), held_item_key(page, "gone", "b")
    store = open_store()
    assert store.held_items() == []
    store.keep_held_item(first_key, b"first")
    store.close()
    first, second = open_store(), open_store()
    assert first.held_items() == [(first_key, b"first")] == second.held_items()
    second.keep_held_item(second_key, b"second")
    second.flush()
    first.drop_held_item(first_key)
    first.flush()
    first.close()
    second.close()
    assert open_store().held_items() == [(second_key, b"second")]


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


def test_rekeying_leaves_no_checks_of_rows_merged_away(open_store: Factory, clock: Clock) -> None:
    # Two rows that end on one key: the one merged away leaves no check behind (a
    # check of no page would count in the report's change set, with no URL).
    def opened(strip: bool) -> StateStore:
        return open_store(
            normalize=partial(normalize_url, strip_trailing_slash=strip),
            normalization={"strip_trailing_slash": strip},
        )

    slash, bare = "https://example.com/docs/", "https://example.com/docs"
    store = opened(False)
    run = store.start_run(SEED)
    run.upsert([(slash, None), (bare, None)])
    store.record(bare, 200, seed=SEED, key=bare, content_hash="old")
    clock.advance(60)
    store.record(slash, 200, seed=SEED, key=slash, content_hash="recent")
    store.flush()
    run.finish({}, discovery_complete=True)
    store.finish_history(run)
    db = store.database
    assert db.execute("SELECT count(*) FROM checks").fetchone()[0] == 2
    store.close()
    store = opened(True)
    assert (store.rekeyed.rekeyed, store.rekeyed.merged) == (1, 1)
    db = store.database
    orphans = "SELECT count(*) FROM checks WHERE page NOT IN (SELECT id FROM pages)"
    assert db.execute(orphans).fetchone()[0] == 0
    kept = db.execute(
        "SELECT p.normalized_url, c.outcome FROM checks AS c JOIN pages AS p ON p.id = c.page"
    ).fetchall()
    assert [tuple(row) for row in kept] == [(bare, "new")]
    report = gather(store.reader(), clock(), SEED)["seeds"][0]
    assert [s["checks"] for s in report["change_sets"]] == [1]


def test_the_operators_edits_make_due_and_forget(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(3)], sitemap_url=SEED)
    run.sitemap_read(SEED, "digest")
    for page in store.due(SEED):
        store.record(
            page.url,
            200,
            seed=SEED,
            key=page.normalized_url,
            content_hash="h",
            content="text",
            memory=b"m",
        )
    store.flush()
    assert store.due(SEED) == []
    assert store.make_due(url=urls(3)[0]) == 1
    assert store.make_due(seed=SEED) == 3
    assert store.make_due() == 3
    assert store.claim_discovery(SEED) is True  # one discovery a seed at a time
    store.end_discovery(SEED)
    assert store.forget(url=urls(3)[0]) == 1
    assert store.forget(seed=SEED) == 2
    assert store.count() == 0


def test_sitemaps_are_remembered_with_their_validators(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(2)], sitemap_url=SEED)
    run.seen_only(["https://example.com/excluded"])
    run.sitemap_read(SEED, "d1", ('"e1"', None), settings="s")
    run.finish({}, discovery_complete=True)
    clock.advance(DAY)
    run = store.start_run(SEED)
    assert run.sitemap_conditions(SEED, "s") == {"If-None-Match": '"e1"'}
    assert run.sitemap_conditions(SEED, "other settings") == {}
    assert run.sitemap_unchanged(SEED, "d1", ('"e2"', None)) is True
    run.sitemap_not_modified(SEED)
    assert run.mark_missing().marked == 0  # an unchanged sitemap's rows are not missing
    assert run.sitemap_conditions(SEED, "s") == {"If-None-Match": '"e2"'}


def test_a_wave_of_moved_dates_makes_nothing_due(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, "2020-01-01T00:00:00Z") for u in urls(12)])
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
    store.flush()
    clock.advance(DAY)
    run = store.start_run(SEED)
    run.upsert([(u, "2020-02-01T10:00:00Z") for u in urls(12)])
    report = run.apply_lastmod()
    assert (report.moved, report.due, len(report.waves)) == (12, 0, 1)
    assert store.lastmod_verdicts(SEED)[0]["waves"] == 1


def test_a_trusted_hosts_pages_are_sampled(open_store: Factory, clock: Clock) -> None:
    store = open_store(lastmod=LastmodRules(sample=0.5))
    listed = [(u, "2020-01-01T00:00:00Z") for u in urls(20)]
    run = store.start_run(SEED)
    run.upsert(listed)

    def fetch_all() -> None:
        for page in store.due(SEED):
            store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
        store.flush()

    fetch_all()
    with store.database.transaction() as db:  # the host's dates have earned trust
        write_hosts(db, [("example.com", 30, 0, 0, 0)], DAY, 20)
    assert store.lastmod_verdicts(SEED)[0]["verdict"] == "trusted"
    run.apply_lastmod()  # the first sample only says when
    clock.advance(1.5 * DAY)
    store.make_due(seed=SEED)
    fetch_all()  # none waits past the next sample
    run = store.start_run(SEED)
    run.upsert(listed)
    assert run.apply_lastmod().sampled == 15  # half of them a day, for 1.5 days
    # Evidence against the dates: the host is demoted, its pages checked sooner.
    fetch_all()
    with store.database.transaction() as db:
        write_hosts(db, [("example.com", 0, 60, 0, 0)], DAY, 20)
    assert store.lastmod_verdicts(SEED)[0]["verdict"] != "trusted"
    clock.advance(DAY + 1)
    assert len(store.due(SEED)) == 20


def test_a_budget_takes_the_oldest_or_the_likeliest(open_store: Factory, clock: Clock) -> None:
    for order in ("oldest", "change"):
        store = open_store(budget_order=order)
        store.start_run(SEED).upsert([(u, None) for u in urls(5)])
        budget = store.budget(SEED, 2)
        assert (budget.due, budget.left) == (5, 3)
        assert len([p for chunk in store.due_chunks(SEED, 2) for p in chunk]) == 2
        store.close()


def test_memories_and_unannounced_changes_are_read_back(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, "2020-01-01T00:00:00Z") for u in urls(1)])
    [url] = urls(1)
    for version in ("a", "b", "c", "d"):
        store.record(url, 200, seed=SEED, key=url, content_hash=version, memory=version.encode())
        store.flush()
        clock.advance(2 * DAY)
    assert open_store().memory(url) == b"d"
    count, listed = store.unannounced(SEED)
    assert (count, listed) == (1, [url])
    assert [run["seed"] for run in store.runs()] == [SEED]
    assert store.count(SEED, gone=False) == 1


def test_the_add_ons_checks_put_the_rows_whose_checks_failed_last(
    open_store: Factory, clock: Clock
) -> None:
    """``pages/unreached.py``: pages no run fetched lately, whatever their schedule once
    not fetched for long, those the run reached passed over, failed checks last."""
    store = open_store()
    run = store.start_run(SEED)
    first, second, third = urls(3)
    for url in (first, second, third):
        store.record(url, 200, seed=SEED, key=url, content_hash="a")
    store.flush()
    run.finish({"new": 3}, discovery_complete=True)
    assert store.unreached(SEED, 2, aged=clock() + 1) == []  # one run so far
    clock.advance(DAY)
    store.start_run(SEED)
    store.record(first, 403, seed=SEED, key=first, site_failure=True)  # a check failed
    store.flush()
    # The last run fetched none; the third was reached by it.
    later = clock() + 1
    found = store.unreached(SEED, 1, reached={third}, aged=later)
    assert found == [second, first]
    assert store.unreached(SEED, 1, limit=1, aged=later) == [second]
    # Fetched since the first of the last two runs: not asked.
    assert store.unreached(SEED, 2, aged=later) == []


def test_max_staleness_brings_rows_scheduled_before_within_it(
    open_store: Factory, clock: Clock
) -> None:
    """INCRECRAWL_MAX_STALENESS set since a row was scheduled: the next run's start
    brings its check within the bound after its last fetch (#52, 1)."""
    store = open_store(policy=LearnedPolicy())
    store.start_run(SEED)
    [url] = urls(1)
    store.record(url, 200, seed=SEED, key=url, content_hash="a")
    store.flush()
    fetched = store.get(url).last_fetched
    assert store.get(url).next_check > fetched + 3_600
    # The reads of the host bound and the spreading (``Hosts.read_priors``, ``planned``).
    store.hosts.new_run()
    assert store.hosts.read_priors(store.database, {"example.com"}) == {"example.com": None}
    assert store.hosts.planned(store.database, fetched, fetched + 10 * DAY).get(1, 0) >= 1
    bounded = open_store(policy=LearnedPolicy(max_staleness=3_600.0))
    bounded.start_run(SEED)
    assert bounded.get(url).next_check == fetched + 3_600


def test_a_hosts_prior_and_plan_are_read_with_the_rows_a_run_fetches(
    open_store: Factory, clock: Clock
) -> None:
    """The host bound and the spreading on both backends (#52, 1-2): the prior of
    the host's change rates and the plan of the coming days are read once per run,
    before recording (on a shared state, with the rows claimed, off the reactor)."""
    store = open_store(policy=LearnedPolicy())
    pages = urls(4)
    for round_ in range(3):  # every page changed at each of its two later fetches
        store.start_run(SEED).upsert([(url, None) for url in pages])
        for page in store.due(SEED):
            store.record(page.url, 200, seed=SEED, key=page.url, content_hash=f"{round_}")
        store.flush()
        clock.advance(4 * DAY)
    store.start_run(SEED)  # a new run reads the prior again, with the rows it fetches
    due = store.due(SEED)
    assert len(due) == 4
    prior = store.hosts.prior("example.com")
    assert prior is not None and prior.alpha == 8  # 8 changes alike: a strong prior
    assert prior.alpha / prior.beta == pytest.approx(8 / (4 * 8 * DAY))
    store.record(due[0].url, 200, seed=SEED, key=due[0].url, content_hash="0")
    assert store.results.leveling.leveler is not None  # the plan: read once this run
    assert store.get(due[0].url).next_check <= clock() + store.get(due[0].url).interval_s


def test_a_memory_amended_after_its_result_is_written_is_written_too(
    open_store: Factory,
) -> None:
    store = open_store()
    [url] = urls(1)
    store.start_run(SEED).upsert([(url, None)])
    store.record(url, 200, seed=SEED, key=url, content_hash="a", memory=b"one")
    store.amend_memory(url, b"one, two")  # its result not written yet
    store.flush()
    assert open_store().memory(url) == b"one, two"
    store.amend_memory(url, b"one, two, three")  # written already
    store.flush()
    assert open_store().memory(url) == b"one, two, three"
    assert store.get(url).content_hash == "a"


def test_fingerprints_are_taken_again_when_the_rules_change(open_store: Factory) -> None:
    store = open_store(volatile_patterns=(), content_scheme=("one",))
    store.start_run(SEED).upsert([(u, None) for u in urls(2)])
    [kept, bare] = urls(2)
    store.record(kept, 200, seed=SEED, key=kept, content_hash="x", content="Today 12:00")
    store.record(bare, 200, seed=SEED, key=bare, content_hash="y")
    store.close()
    store = open_store(volatile_patterns=(r"\d\d:\d\d",), content_scheme=("one",))
    assert store.get(bare).content_hash == "old:y"  # no text to take it from
    assert store.get(kept).content_hash not in ("x", "old:x")
    store.close()
    store = open_store(content_scheme=("two",))
    assert store.get(kept).content_hash.startswith("old:")


def test_an_item_rows_fingerprint_is_no_page_text(open_store: Factory) -> None:
    # An item's fields (INCRECRAWL_ITEM_KEY) pass through no converter: another way
    # of taking pages' text leaves its fingerprint as it is, so its edit is a change.
    store = open_store(content_scheme=("one",))
    [page] = urls(1)
    store.start_run(SEED).upsert([(page, None)])
    store.record(page, 200, seed=SEED, key=page, content_hash="p")
    item_key = f"{store.normalize(page)}#item:sku=1"
    store.record(page, 200, seed=SEED, key=item_key, content_hash="i")
    store.close()
    store = open_store(content_scheme=("two",))
    assert store.get(page).content_hash == "old:p"
    item = store.results.lookup(item_key)
    assert item is not None and item.content_hash == "i"


def test_a_sites_item_rows_are_read_by_its_prefix(open_store: Factory) -> None:
    # An earlier version kept a key's row under its page (pages/keyed.py): a site's
    # are read at once, and no other site's (one whose name starts the same) nor its
    # pages' rows.
    store = open_store()
    page, other = "https://example.com/p/2", "https://example.com.evil/p"
    store.start_run(SEED).upsert([(page, None), (other, None)])
    for url in (page, other):
        store.record(url, 200, seed=SEED, key=url, content_hash="p")
        store.record(url, 200, seed=SEED, key=f"{url}#item:text=100%_a", content_hash="i")
    store.flush()
    rows = store.item_rows("https://example.com/")
    assert [(key, content_hash) for key, _, content_hash in rows] == [
        ("https://example.com/p/2#item:text=100%_a", "i")
    ]
    assert rows[0][1] is not None  # when it was fetched


def test_a_projects_pages_with_state_are_live_or_gone_since_the_run_began(
    open_store: Factory, clock: Clock
) -> None:
    # The add-on's summary weighs a run's fetches against them (crawl/shared_state.py).
    store = open_store()
    live, gone_before, gone_now = urls(3)
    store.start_run(SEED).upsert([(url, None) for url in urls(3)])
    for url in urls(3):
        store.record(url, 200, seed=SEED, key=store.normalize(url), content_hash="p")
    store.record(live, 200, seed=SEED, key=f"{store.normalize(live)}#item:sku=1", content_hash="i")
    store.record(gone_before, 404, seed=SEED, key=store.normalize(gone_before))
    clock.advance(DAY)
    began = clock()
    store.record(gone_now, 404, seed=SEED, key=store.normalize(gone_now))
    assert store.with_state(SEED, began) == 2  # the live page and the one gone now
    assert store.with_state(SEED, began + DAY) == 1
    assert store.with_state(OTHER, began) == 0


def test_pages_of_an_old_scheme_are_due_now_and_counted(open_store: Factory, clock: Clock) -> None:
    # Marked old, a page is re-read in the run that starts (not at its schedule: an
    # edit made meanwhile would be its baseline); a gone page is left as it is. The
    # scheme as an earlier version spelt it, under today's versions, is today's.
    store = open_store(content_scheme=("one",))
    [page, gone] = urls(2)
    store.start_run(SEED).upsert([(page, None), (gone, None)])
    store.record(page, 200, seed=SEED, key=page, content_hash="p")
    store.record(gone, 200, seed=SEED, key=gone, content_hash="g")
    store.record(gone, 404, seed=SEED, key=gone)
    store.close()
    assert open_store(content_scheme=("one",)).old_fingerprints == 0
    assert open_store(content_scheme=("uno", "one")).old_fingerprints == 0  # another spelling
    clock.advance(60.0)
    store = open_store(content_scheme=("two",))
    assert store.old_fingerprints == 1
    assert store.get(page).next_check == clock() and store.get(page).fingerprint_old
    assert store.get(gone).next_check > clock()
    store.record(page, 200, seed=SEED, key=page, content_hash="p2")
    store.close()
    assert open_store(content_scheme=("two",)).old_fingerprints == 0


def test_the_commands_reports_read_the_state(open_store: Factory, clock: Clock) -> None:
    store = open_store()
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(3)])
    for page in store.due(SEED):
        for version in ("a", "b", "c"):
            store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash=version)
    store.flush()
    run.finish({"new": 3}, discovery_complete=True)
    status = _status(store.reader(), clock())
    assert [seed["pages"] for seed in status["seeds"]] == [3]
    report = gather(store.reader(), clock(), SEED)
    assert [seed["pages"] for seed in report["seeds"]] == [3]
    db, sql = store.database, store.database.sql
    assert len(db.execute(sql.noisy_pages, (2,)).fetchall()) == 3
    assert len(db.execute(sql.noisy_pages_of_seed, (2, SEED)).fetchall()) == 3
    assert db.execute(sql.page_exists, (urls(3)[0],)).fetchone() is not None
    assert db.execute(sql.seed_exists, (OTHER,)).fetchone() is None
    assert db.execute(sql.seed_of_page, (urls(3)[0],)).fetchone()[0] == SEED
    queue = {"seed": SEED, "now": clock() + 10 * DAY, "check": 0.0, "id": 0, "limit": 10}
    assert len(db.tuples(sql.due_after, queue).fetchall()) == 3


def test_tokens_are_read_over_the_week_and_the_plan_month(
    open_store: Factory, clock: Clock
) -> None:
    """``token_plan.py`` reads every seed's runs: the week, the plan month (from the
    reset day), its projection and a run's share, the same on every backend."""
    clock.now = datetime(2026, 11, 28, 12, tzinfo=timezone.utc).timestamp()
    store = open_store()
    for seed, tokens in [(SEED, 10), (OTHER, 20), (SEED, 30), (SEED, 40)]:
        run = store.start_run(seed)
        run.finish({"tokens_charged": tokens}, discovery_complete=True)
        clock.advance(2 * DAY)  # Nov 28, 30, Dec 2, Dec 4; now Dec 6 12:00
    figures = store.token_figures(clock(), 1, 500)
    assert (figures.week, figures.month) == (90, 70)  # from Nov 29 12:00; from Dec 1
    # 90 over the 6 days since the week's first run, to the reset on Jan 1 (25.5 days)
    assert figures.projected == 70 + round(90 / 6 * 25.5) == 452
    assert "since 2026-12-01 (projected 452 by 2027-01-01; plan 500: 430 left)" in figures.line()
    assert gather(store.reader(), clock(), reset_day=1, budget=500)["tokens"]["month"] == 70
    assert _status(store.reader(), clock(), 1, 500)["tokens"]["week"] == 90
    store.start_run(SEED)  # the run asking: 2 days after the last, as all before
    share = store.month_share(clock(), 1, 500)
    assert (share.left, share.interval) == (430, 2 * DAY)
    # 430 over 12.75 runs is 33; the month's line by the next run (7.5 of 31 days) is
    # 120, 70 spent: 50, catching up.
    assert int(430 / (25.5 / 2)) == 33 and share.share == 500 * 75 // 310 - 70 == 50


def test_tokens_are_written_as_they_are_spent(open_store: Factory, clock: Clock) -> None:
    """A run's tokens so far are written with its results: a run that never finishes
    (killed) spent them, and another store on the same state (an overlapping run)
    counts them in the month, before the run ends."""
    clock.now = datetime(2026, 12, 10, 12, tzinfo=timezone.utc).timestamp()
    store, other = open_store(), open_store()
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(3)])
    charged = [0]
    store.note_spending(run.id, lambda: charged[0])
    for page in store.due(SEED):
        charged[0] += 2  # the API's charge for the page, as the stats count it
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="h")
    store.flush()
    assert other.token_figures(clock(), 1, 500).month == 6
    charged[0] = 5  # never less than what was written (a stats reset, say)
    [page] = store.due(SEED, 1) or [store.get(urls(1)[0])]
    store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="i")
    store.flush()
    assert other.token_figures(clock(), 1, 500).month == 6
    run.finish({"tokens_charged": 7}, discovery_complete=True)
    assert other.token_figures(clock(), 1, 500).month == 7


def test_each_run_keeps_its_checks_for_the_report(open_store: Factory, clock: Clock) -> None:
    """What each run fetched (``state/history.py``): a check per page written with
    its result, the run's responses by kind, only the last runs' checks kept; the
    report reads each run's change set and the changed pages' histories."""
    store = open_store(history_runs=2)
    [first, second] = urls(2)
    for answers in [(("a", 200), ("x", 200)), (("b", 200), (None, 503))]:
        run = store.start_run(SEED)
        run.upsert([(u, None) for u in urls(2)])
        for page, (version, status) in zip(store.due(SEED), answers, strict=True):
            store.record(
                page.url,
                status,
                seed=SEED,
                key=page.normalized_url,
                content_hash=version,
                site_failure=version is None,
                error_kind=None if version else f"HTTP {status}",
            )
        store.flush()
        run.finish({}, discovery_complete=True)
        store.finish_history(run)
        clock.advance(2 * DAY)
        store.make_due(seed=SEED)
    runs = [row["id"] for row in store.runs(SEED)]
    report = gather(store.reader(), clock(), SEED)["seeds"][0]
    assert [row["statuses"] for row in report["runs"]] == [{"200": 2}, {"200": 1, "HTTP 503": 1}]
    assert [(s["run"], s["checks"]) for s in report["change_sets"]] == [(runs[1], 2), (runs[0], 2)]
    assert [c["url"] for c in report["change_sets"][0]["changes"]] == [first]
    histories = {page["url"]: page["checks"] for page in report["histories"]}
    assert [check[3] for check in histories[first]] == ["new", "changed"]
    # A third run: the first run's checks go (two runs kept), its counts stay.
    run = store.start_run(SEED)
    run.upsert([(u, None) for u in urls(2)])
    for page in store.due(SEED):
        store.record(page.url, 200, seed=SEED, key=page.normalized_url, content_hash="c")
    store.flush()
    run.finish({}, discovery_complete=True)
    store.finish_history(run)
    report = gather(open_store().reader(), clock(), SEED)["seeds"][0]
    kept = {s["run"]: s["checks"] for s in report["change_sets"]}
    assert kept[runs[0]] == 0 and kept[runs[1]] == 2
    assert report["runs"][0]["statuses"] == {"200": 2}
    store.forget(url=second)  # its checks go with it
    report = gather(store.reader(), clock(), SEED)["seeds"][0]
    assert {s["run"]: s["checks"] for s in report["change_sets"]}[runs[1]] == 1


def _named(statements: Any) -> dict[str, set[str]]:
    """Each statement's text -> the names that say it (a name may hold several)."""
    texts: dict[str, set[str]] = {}
    for name in names():
        value = getattr(statements, name)
        if callable(value):
            continue  # built per call: checked apart
        if isinstance(value, Mapping):
            value = tuple(value.values())
        for text in value if isinstance(value, tuple) else (value,):
            if text is not None:
                texts.setdefault(text, set()).add(name)
    return texts


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_named_statement_ran_on_every_backend(backend: str) -> None:
    """Runs last: the tests above ran every statement of the interface on *backend*
    (every text of a name that holds several)."""
    statements = sqlite.STATEMENTS if backend == "sqlite" else postgres.STATEMENTS
    texts = _named(statements)
    never = sorted(
        f"{sorted(names)[0]}: {text.split()[:4]}"
        for text, names in texts.items()
        if text not in RAN[backend]
    )
    counting = statements.count_pages([], False)
    assert never == [], f"never run on {backend}: " + "; ".join(never)
    assert any(text.startswith(counting) for text in RAN[backend]), "count_pages"
