"""A run in the state: its discovery (rows listed, missing ones counted, an unchanged
sitemap not applied again), its end, and its record; for every pairing of policy and
storage (conftest.py)."""

from __future__ import annotations

import pytest

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.state.scenario import HOUR, SEED, discover


def test_missing_runs_lead_to_a_confirming_fetch_not_to_gone(
    store: StateStore, clock: Clock
) -> None:
    kept, dropped = "https://example.com/kept", "https://example.com/dropped"
    run = discover(store, SEED, [kept, dropped])
    run.mark_missing()
    for url in (kept, dropped):
        store.record(url, 200, seed=SEED, content_hash="h")
    for n in (1, 2, 3):
        clock.advance(HOUR)
        run = discover(store, SEED, [kept])
        result = run.mark_missing()
        assert result.marked == 1
        assert store.get(dropped).missing_runs == n
        due = [p.normalized_url for p in store.due(SEED)]
        assert due == ([dropped] if n == 3 else [])
        assert result.due == (1 if n == 3 else 0)
    # The confirming fetch finds it alive; later runs do not force another one.
    store.record(dropped, 200, seed=SEED, content_hash="h")
    for n in (4, 5):
        clock.advance(HOUR)
        result = discover(store, SEED, [kept]).mark_missing()
        assert store.get(dropped).missing_runs == n
        assert result.due == 0 and store.due(SEED) == []
    assert store.get(dropped).gone is False
    assert store.get(kept).missing_runs == 0


def test_missing_marking_is_scoped_to_the_run_seed(store: StateStore) -> None:
    other = "https://other.example/sitemap.xml"
    discover(store, SEED, ["https://example.com/a"])
    discover(store, other, ["https://other.example/b"])
    run = discover(store, SEED, [])
    assert run.mark_missing().marked == 1
    assert store.get("https://example.com/a").missing_runs == 1
    assert store.get("https://other.example/b").missing_runs == 0


def test_runs_are_recorded(store: StateStore, clock: Clock) -> None:
    run = store.start_run(SEED)
    assert store.runs(SEED)[0]["finished_at"] is None  # unfinished until finished
    clock.advance(5)
    run.finish(
        {"new": 3, "due": 4, "api_requests": 4},
        discovery_complete=True,
        close_reason="finished",
    )
    row = store.runs(SEED)[0]
    assert (row["new"], row["due"], row["api_requests"], row["discovery_complete"]) == (3, 4, 4, 1)
    assert row["finished_at"] == row["started_at"] + 5 and row["close_reason"] == "finished"
    with pytest.raises(ValueError):
        run.finish({"bogus": 1}, discovery_complete=True)


def test_an_identical_sitemap_is_not_applied_again(store: StateStore, clock: Clock) -> None:
    child = "https://example.com/sitemap-1.xml"
    urls = [f"https://example.com/{i}" for i in range(3)]
    run = store.start_run(SEED)
    assert run.sitemap_unchanged(child, "d1") is False
    run.upsert([(u, None) for u in urls], sitemap_url=child)
    run.sitemap_read(child, "d1")
    run.mark_missing()
    # Next run: same digest, nothing applied, and its rows are not missing.
    clock.advance(3600)
    run = store.start_run(SEED)
    assert run.sitemap_unchanged(child, "d1") is True
    assert run.mark_missing().marked == 0
    # The child changes and drops a URL: that row is missing from then on,
    # also in later runs where the (new) child is unchanged.
    for n in (1, 2, 3):
        clock.advance(3600)
        run = store.start_run(SEED)
        if not run.sitemap_unchanged(child, "d2"):
            run.upsert([(u, None) for u in urls[:2]], sitemap_url=child)
            run.sitemap_read(child, "d2")
        run.mark_missing()
        assert store.get(urls[2]).missing_runs == n
        assert store.get(urls[0]).missing_runs == 0


def test_a_later_run_ends_the_discovery_of_the_earlier_one(store: StateStore) -> None:
    first = store.start_run(SEED)
    first.upsert([("https://example.com/x", None)])
    store.start_run(SEED)  # its discovery tables replace the first run's
    with pytest.raises(ValueError, match="is over"):
        first.upsert([("https://example.com/y", None)])
    with pytest.raises(ValueError, match="is over"):
        first.mark_missing()


def test_making_pages_due_keeps_their_missing_runs(store: StateStore, clock: Clock) -> None:
    urls = ["https://example.com/a", "https://example.com/b"]
    discover(store, SEED, urls)
    run = store.start_run(SEED)
    run.upsert([(urls[0], None)])
    run.mark_missing()  # b is absent once
    assert store.make_due(seed=SEED) == 2
    assert store.get(urls[1]).missing_runs == 1  # the operator's edit is no listing
    assert [p.normalized_url for p in store.due(SEED)] == urls
