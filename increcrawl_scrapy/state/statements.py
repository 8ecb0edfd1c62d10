"""The state's named statements: what every backend says in its own SQL.

Each part of the store asks its backend for a statement by name
(``database.sql.fill_chunk``) and runs it with the same parameters on either;
``state/sqlite/`` and ``state/postgres/`` each write their own text for every name
(nothing is rewritten from one dialect into the other). A name a backend does not
need is None there (SQLite takes no row locks: one writer holds the file).
``tests/state/test_storage_contract.py`` runs every name on both backends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

#: What an operator's edit applies to: one page (its key), a seed's pages, or all.
TARGETS = ("page", "seed", "all")
#: What forgetting applies to (never the whole state).
FORGET_TARGETS = ("page", "seed")


class DiscoveryStatements(Protocol):
    """A run and its discovery (``runs.py``), date moves (``lastmod.py``), the
    fetch budget (``queue.py``)."""

    insert_run: str
    earlier_run: str  # whether a seed had a run before this one
    run_tables: tuple[str, ...]  # the connection's tables of the current run
    count_future: str
    add_sitemap: str
    clear_chunk: str
    fill_chunk: str  # the chunk's rows into the chunk table (Session.fill)
    listed_before: str  # the chunk's rows this run had not listed, by their seed
    chunk_plan: tuple[str, ...]  # how the chunk's statements are to be planned
    lock_chunk_rows: str | None  # the chunk's rows locked in key order (before listed_before)
    apply_chunk: tuple[str, ...]
    apply_feed_chunk: tuple[str, ...]
    #: A signal feed's chunk: its dates make existing rows due, nothing else.
    apply_signal_chunk: tuple[str, ...]
    mark_seen_only: str
    sitemap_digest: str
    add_unchanged: str
    set_sitemap_validators: str
    sitemap_conditions: str
    detach_from_sitemap: str
    sitemap_read: str
    clear_missing: str
    find_missing: str
    count_missing_due: str
    mark_missing: str
    any_moves: str
    finish_run: str
    note_tokens: str
    move_buckets: str
    host_sizes: str  # of a JSON array of hosts
    host_verdicts: str
    clear_waves: str
    add_wave: str
    clear_deaf: str
    add_deaf: str
    count_wave: str
    count_moves: str
    moves_due: str
    moves_remembered: str
    clear_moves: str
    seed_has_host: str
    sampled_at: str
    set_sampled_at: str
    count_waiting: str
    sample_due: str
    due_count: str
    due_likeliest: str
    due_oldest: str
    budget_table: str
    clear_budget: str
    add_budget: str
    left_waiting: str


class ResultStatements(Protocol):
    """Pages read and results written (``results.py``, ``writes.py``, ``queue.py``),
    hosts' evidence (``hosts.py``), kept contents and memories."""

    page_by_key: str
    pages_by_keys: str  # of a JSON array of keys
    due_after: str
    seed_of_page: str
    insert_result: str
    update_result: str
    keep_content: str
    last_change: str
    remember: str
    read_memory: str
    item_rows: str  # of a site: rows kept under their pages (``pages/keyed.py``)
    forget_memory: str
    held_items: str  # the memories' keys in [lower, upper), bytewise (readings.py)
    host_counts: str  # of a JSON array of hosts
    host_rates: str  # per host of a JSON array, its pages' totals for its rate prior
    planned_days: str  # checks planned per coming day
    bound_staleness: str  # INCRECRAWL_MAX_STALENESS over rows scheduled before
    add_host_evidence: str
    set_host_verdict: str
    demote: str
    promote: str


class UpkeepStatements(Protocol):
    """Settings, re-keying and fingerprints taken again (``upkeep.py``),
    the operator's edits (``edits.py``, by target), and what
    the store and the commands report."""

    read_setting: str
    write_setting: str
    rekey_table: str
    clear_rekey: str
    all_keys: str
    add_rekey: str
    rekey_index: str
    merge_collisions: str
    drop_orphan_contents: str
    drop_orphan_checks: str
    park_contents: str
    park_pages: str
    rekey_pages: str
    rekey_contents: str
    drop_rekey: str
    kept_fingerprints: str
    set_fingerprint: str
    mark_old: str
    mark_old_without_content: str
    make_old_due: str
    count_old: str
    count_with_state: str
    make_due: Mapping[str, str]
    reread_sitemaps: Mapping[str, str]
    forget_seed_sitemaps: str
    forget_contents: Mapping[str, str]
    forget_memories: Mapping[str, str]
    forget_checks: Mapping[str, str]  # history.py's checks of the pages forgotten
    forget_pages: Mapping[str, str]
    seed_hosts: str
    unannounced_count: str
    unannounced_urls: str
    all_runs: str
    seed_runs: str
    discovery_lock: str | None  # one discovery a seed at a time
    discovery_unlock: str | None
    seeds: str
    status_counts: str
    fetched_intervals: str
    status_verdicts: str
    status_runs: str
    runs_hidden: str
    unreached: str  # pages due since a run and fetched by none since (the add-on's)
    unreached_checks: str  # due or aged pages fetched by no run since, failed checks last
    report_counts: str
    report_runs: str
    changing_pages: str
    report_verdicts: str
    spending_runs: str  # (started_at, tokens_charged) of every seed's runs since a time
    recent_run_starts: str  # the latest runs' starts, of every seed
    page_exists: str
    seed_exists: str
    noisy_pages: str
    noisy_pages_of_seed: str

    def count_pages(self, columns: Sequence[str], seed: bool) -> str:
        """How many rows have the given *columns*' values (each may be NULL), of a
        seed too with *seed*."""
        ...


class HistoryStatements(Protocol):
    """What each run fetched (``history.py``) and what the report reads of it
    (``reports.py``)."""

    record_check: str  # of the page keyed by the last parameter, by its id
    set_run_statuses: str
    oldest_run_dropped: str  # the newest of a seed's runs past the ones kept
    drop_checks: str
    run_check_count: str
    change_set: str  # a run's pages new, changed or gone, by time
    page_checks: str  # of a JSON array of page ids
    pages_by_ids: str  # of a JSON array of page ids


class Statements(
    DiscoveryStatements, ResultStatements, UpkeepStatements, HistoryStatements, Protocol
):
    """Every statement a backend says."""


def names(kind: type = Statements) -> list[str]:
    """The names of the interface (the contract tests run each on every backend)."""
    found: dict[str, None] = {}
    for klass in reversed(kind.__mro__):
        for name in getattr(klass, "__annotations__", {}):
            if not name.startswith("_"):
                found[name] = None
        for name, value in vars(klass).items():
            if callable(value) and not name.startswith("_") and klass is not Protocol:
                found[name] = None
    return [name for name in found if name not in ("names",)]
