"""A page's key: spellings of one URL are one row, a result lands on the key the
queue handed out, and changed normalization settings rekey the rows; for
every pairing of policy and storage (conftest.py)."""

from __future__ import annotations

from pathlib import Path

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock
from tests.state.scenario import HOUR, SEED, discover


def test_results_are_recorded_on_the_key_the_queue_handed_out(
    store: StateStore, clock: Clock
) -> None:
    discover(store, SEED, ["https://example.com/a/"])
    [page] = store.due(SEED)
    got = store.record(
        "https://cdn.example.net/final",
        200,
        seed=SEED,
        key=page.normalized_url,
        content_hash="h",
        final_url="https://cdn.example.net/final",
    )
    assert got.page.normalized_url == page.normalized_url and store.count() == 1
    assert store.get(page.url).final_url == "https://cdn.example.net/final"


def test_changed_normalization_settings_rekey_rows_and_merge_collisions(
    tmp_path: Path, clock: Clock
) -> None:
    from functools import partial

    from increcrawl_scrapy.urls import normalize_url

    path = tmp_path / "n.sqlite"

    def opened(strip: bool) -> StateStore:
        return StateStore(
            path,
            clock=clock,
            normalize=partial(normalize_url, strip_trailing_slash=strip),
            normalization={"strip_trailing_slash": strip},
        )

    with opened(False) as store:
        discover(
            store,
            SEED,
            ["https://example.com/docs/", "https://example.com/docs", "https://example.com/a/"],
        )
        store.record("https://example.com/docs", 200, seed=SEED, content_hash="old")
        clock.advance(HOUR)
        store.record("https://example.com/docs/", 200, seed=SEED, content_hash="recent")
        assert store.count() == 3
    with opened(True) as store:
        assert (store.rekeyed.rekeyed, store.rekeyed.merged) == (2, 1)
        assert store.count() == 2
        assert store.get("https://example.com/docs").content_hash == "recent"
        assert store.get("https://example.com/a").normalized_url == "https://example.com/a"
    with opened(True) as store:  # settings as stored: nothing to do
        assert store.rekeyed.rekeyed == 0


def test_normalization_variants_are_one_row(store: StateStore) -> None:
    discover(
        store,
        SEED,
        [
            "https://Example.com/a/",
            "https://example.com:443/a?utm_source=x",
            "https://example.com/a#frag",
        ],
    )
    assert store.count() == 1
    store.record("HTTPS://EXAMPLE.COM/a/", 200, seed=SEED, content_hash="h")
    assert store.get("https://example.com/a").fetch_count == 1


def test_duplicates_in_one_chunk_are_one_row_with_the_first_spelling(store: StateStore) -> None:
    run = store.start_run(SEED)
    entries = [("https://example.com/a", "2024-01-01")] + [("https://EXAMPLE.com/a/", None)] * 1000
    assert run.upsert(entries) == 1
    assert store.get("https://example.com/a").url == "https://example.com/a"
