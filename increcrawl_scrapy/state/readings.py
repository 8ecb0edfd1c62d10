"""What the store tells of a state beside its queue (hosts' verdicts, settings kept
for the next crawl, unannounced changes, runs), part of ``StateStore``."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from w3lib.url import canonicalize_url

from increcrawl_scrapy.schedule import token_plan
from increcrawl_scrapy.state import memories, spending
from increcrawl_scrapy.state.backend import serialized
from increcrawl_scrapy.state.reports import StateReader
from increcrawl_scrapy.state.upkeep import read_setting, write_setting

if TYPE_CHECKING:
    from collections.abc import Callable

    from increcrawl_scrapy.schedule.rows import PageState
    from increcrawl_scrapy.state.backend import Backend
    from increcrawl_scrapy.state.results import Results


#: Rows read for the add-on's direct checks, at most: those the run reached are
#: passed over in them (a state with more pages not fetched lately checks the first).
UNREACHED_SCAN = 50_000


class StoreReadings:
    """Mixed into ``StateStore``, whose database and results it uses."""

    database: Backend
    results: Results
    normalize: Callable[[str], str]

    @serialized
    def memory(self, url: str, key: str | None = None) -> bytes | None:
        """What *url*'s (or the row *key*'s) last fetch left for the next one
        (``pages/memory.py``); shared: a read, off the reactor's thread."""
        return memories.lookup(self.results, self.database, key or self.normalize(url))

    @serialized
    def row(self, key: str) -> PageState | None:
        """The row *key* as it stands (a key, not a URL: an item's row), unwritten
        results included; read from the table when not at hand."""
        return self.results.lookup(key)

    @serialized
    def held_items(self) -> list[tuple[str, bytes]]:
        """The items whose verdict (moved, or new or gone) waits for a later run
        (``pages/pending.py``), every site's: each its entry (``held_item_key``)
        and its body, as stored; shared: a read, off the reactor's thread."""
        database = self.database
        rows = database.tuples(database.sql.held_items, (HELD_ITEMS, HELD_ITEMS_END))
        return [(str(key), bytes(body)) for key, body in rows.fetchall()]

    @serialized
    def memories_under(self, prefix: str) -> dict[str, bytes]:
        """The memories whose keys begin with *prefix* (``memories.under``: rows a
        crawl adds and deletes one by one); shared: a read, off the reactor's thread."""
        return memories.under(self.results, self.database, prefix)

    @serialized
    def keep_held_item(self, entry: str, body: bytes) -> None:
        """One item held for a later run, written with the next flush: a row of
        its own (a memory of no page's), so that a crawl writes only those it
        holds, never another's at once (two cron jobs, two nodes)."""
        memories.keep_alone(self.results, entry, body, recorded=False)

    @serialized
    def drop_held_item(self, entry: str) -> None:
        """A held item delivered (or paired): its row deleted with the next flush
        (an empty memory is deleted, ``writes.py``)."""
        memories.keep_alone(self.results, entry, b"", recorded=False)

    @serialized
    def amend_memory(self, key: str, memory: bytes) -> None:
        """The row *key*'s memory grew after its result was recorded this run (an item
        another listing lists too, ``pages/versions.py``): written with its result,
        else with its row as it stands (a read: off the reactor's thread when shared).
        A row's key, not a URL: a postback's row is no URL's."""
        memories.amend(self.results, key, memory)

    @serialized
    def item_rows(self, site: str) -> list[tuple[str, float | None, str | None]]:
        """The stored item rows (``PAGE#item:KEY``) of *site* (``https://host/``):
        key, last fetch, fingerprint; an earlier version kept a key under its page
        (``pages/keyed.py``). Shared: a read, off the reactor's thread."""
        bounds = (site, site[:-1] + chr(ord(site[-1]) + 1))  # every key starting so
        rows = self.database.tuples(self.database.sql.item_rows, bounds).fetchall()
        return [(str(key), fetched, content_hash) for key, fetched, content_hash in rows]

    @serialized
    def covered_since(self, seed: str, times: Collection[float]) -> set[float]:
        """Of *times*, those by which every live page of *seed* then due was fetched
        since: none has its next check at or before it any more (``pages/moved.py``:
        a bounded run may then deliver the items held at that time)."""
        self.results.flush()
        reader = StateReader(self.database)
        return {when for when in times if not reader.status_counts(seed, when, when)["due_now"]}

    def reader(self) -> StateReader:
        """The commands' questions asked of this store's own state, on its connection
        (a process that has the store open: its tests, a benchmark). Flush first for
        what is still buffered."""
        return StateReader(self.database)

    @serialized
    def lastmod_verdicts(self, seed: str) -> list[dict[str, Any]]:
        """What the sitemap dates of *seed*'s hosts have earned, with the evidence."""
        self.results.flush()
        rows = self.database.execute(self.database.sql.seed_hosts, (seed,))
        return [dict(row) for row in rows]

    @serialized
    def token_figures(self, at: float, reset_day: int, budget: int) -> token_plan.TokenFigures:
        """The tokens of the state's runs this week and this plan month."""
        return spending.token_figures(self.database, at, reset_day, budget)

    @serialized
    def month_share(self, at: float, reset_day: int, budget: int) -> token_plan.MonthShare:
        """A run's share of INCRECRAWL_MONTHLY_TOKENS (``token_plan.py``)."""
        return spending.month_share(self.database, at, reset_day, budget)

    @serialized
    def remembered(self, name: str) -> str | None:
        """What a crawl kept for the next under *name* (``remember``), or None."""
        return read_setting(self.database, name)

    @serialized
    def remember(self, name: str, value: str) -> None:
        with self.database.transaction() as db:
            write_setting(db, name, value)

    @serialized
    def with_state(self, seed: str, since: float) -> int:
        """A project's own spider's pages with state: those live, and those gone that
        a run begun at *since* fetched (not its items' rows, ``INCRECRAWL_ITEM_KEY``)."""
        self.results.flush()
        sql = self.database.sql.count_with_state
        return int(self.database.execute(sql, (seed, since)).fetchone()[0])

    @serialized
    def unannounced(self, seed: str, limit: int = 5) -> tuple[int, list[str]]:
        """Pages of *seed* that changed twice or more while their sitemap date stood
        still, on hosts whose dates are not judged stale (volatile text the rules
        miss, on a site whose dates are otherwise right): how many, the first *limit*."""
        self.results.flush()
        sql = self.database.sql
        (count,) = self.database.execute(sql.unannounced_count, (seed,)).fetchone()
        rows = self.database.execute(sql.unannounced_urls, (seed, limit))
        return int(count), [row[0] for row in rows]

    @serialized
    def unreached(
        self,
        seed: str,
        runs: int,
        limit: int = 1_000,
        reached: Collection[str] = (),
        aged: float = 0.0,
    ) -> list[str]:
        """*seed*'s pages with state that its last *runs* runs (this one too) did not
        fetch, due since the first of them or last fetched before *aged*, and that
        this run did not reach (*reached*: canonical URLs), at most *limit*: the
        add-on's direct checks (``pages/unreached.py``), those whose checks failed
        last. Of the first ``UNREACHED_SCAN`` such rows."""
        self.results.flush()
        started = [run["started_at"] for run in self.runs(seed)][-runs:]
        if len(started) < runs:
            return []
        reader = StateReader(self.database)
        rows = reader.unreached_checks(seed, started[0], aged, UNREACHED_SCAN)
        found = [url for url in rows if canonicalize_url(url) not in reached]
        return found[:limit]

    def runs(self, seed: str | None = None) -> list[dict[str, Any]]:
        sql = self.database.sql
        rows = (
            self.database.execute(sql.seed_runs, (seed,))
            if seed
            else self.database.execute(sql.all_runs)
        )
        return [dict(row) for row in rows]


#: The memories' keys of held items, and the first key past them (bytewise).
HELD_ITEMS = "increcrawl:held:"
HELD_ITEMS_END = "increcrawl:held;"


def held_item_key(page: str, label: str, whole: str) -> str:
    """The memories' key of an item held for a later run: under its page's row
    (*page*, which names its site), its label and its print (no URL: no page's)."""
    return f"{HELD_ITEMS}{page}#{label}:{whole}"
