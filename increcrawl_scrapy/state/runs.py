"""A run of a seed: its row in ``runs`` and its discovery (upsert, sitemap digests,
missing-marking). A :class:`Run` exists only once started on a store, so every
discovery step is tied to a started run by construction."""

from __future__ import annotations

import functools
import logging
import math
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

from increcrawl_scrapy.rows import NOISY, RUN_COUNTS, STALE, TRUSTED, MissingResult
from increcrawl_scrapy.state.database import Database
from increcrawl_scrapy.urls import host_of

logger = logging.getLogger(__name__)

#: A wave needs at least this many pages as well as its share of the host.
WAVE_MIN_PAGES = 10


@dataclass(frozen=True)
class LastmodRules:
    """How far sitemap dates are believed (INCRECRAWL_LASTMOD_*)."""

    min_evidence: int = 20
    wave_share: float = 0.5  # of a host's pages moving to one minute at once: a wave
    sample: float = 0.0005  # share of a trusted host's unmoved pages checked a day


@dataclass
class LastmodReport:
    """What one discovery's date moves meant."""

    moved: int = 0  # rows whose lastmod moved
    due: int = 0  # of which made due now
    waves: list[tuple[str, str, int]] = field(default_factory=list)  # host, minute, pages
    sampled: int = 0  # unmoved rows of trusted hosts checked anyway


_F = TypeVar("_F", bound=Callable[..., Any])


def _step(method: _F) -> _F:
    """A discovery step: serialized, on the live run, after pending results are
    written (discovery must see them, and decides over them)."""

    @functools.wraps(method)
    def wrapper(self: Run, *args: Any, **kwargs: Any) -> Any:
        with self.database.mutex:
            if self.database.current_run is not self:
                raise ValueError(
                    f"run {self.id} is over: a later run started on this store "
                    "(its discovery tables belong to that run now)"
                )
            self._settle()
            return method(self, *args, **kwargs)

    return cast("_F", wrapper)


class Run:
    """Started by :meth:`StateStore.start_run`; what the run has seen is kept in the
    connection's temporary tables."""

    def __init__(
        self,
        database: Database,
        run_id: int,
        seed: str,
        *,
        settle: Callable[[], None],
        normalize: Callable[[str], str],
        clock: Callable[[], float],
        default_interval: float,
        missing_runs: int,
        lastmod: LastmodRules,
    ) -> None:
        self.database = database
        self.id = run_id
        self.seed = seed
        self._settle = settle
        self._normalize = normalize
        self._clock = clock
        self._default_interval = default_interval
        self._missing_runs = missing_runs
        self._lastmod = lastmod

    @classmethod
    def start(cls, database: Database, seed: str, **parts: Any) -> Run:
        with database.transaction() as db:
            cursor = db.execute(
                "INSERT INTO runs (seed, started_at) VALUES (?, ?)", (seed, parts["clock"]())
            )
            for statement in _RUN_TABLES:
                db.execute(statement)
        run = cls(database, int(cursor.lastrowid or 0), seed, **parts)
        database.current_run = run
        return run

    @_step
    def upsert(
        self, entries: Iterable[tuple[str, str | None]], *, sitemap_url: str | None = None
    ) -> int:
        """Record ``(url, lastmod)`` pairs seen by this run's discovery (one chunk of
        a sitemap), in one set-based transaction: new rows are inserted due now, a
        changed lastmod makes a row due now, a row seen again is no longer missing
        and belongs to this run's seed. URLs that cannot be normalized are skipped.
        Returns how many were recorded."""
        now = self._clock()
        latest = _iso(now)
        future: Counter[str] = Counter()
        rows: dict[str, tuple[str, str, str | None, str | None, str, bool]] = {}
        for url, lastmod in entries:
            try:
                key = self._normalize(url)
            except ValueError:
                continue
            host = host_of(key)
            ahead = lastmod is not None and lastmod > latest
            if ahead:
                # A date in the future: counted, clamped to now for a new row, and
                # never a move (it would move again on every run).
                future[host] += 1
                lastmod = latest
            rows.setdefault(key, (key, url, lastmod, sitemap_url, host, ahead))
        if not rows:
            return 0
        params = {"seed": self.seed, "now": now, "interval": self._default_interval}
        with self.database.transaction() as db:
            for host, count in future.items():
                db.execute(_COUNT_FUTURE, (host, count))
            if sitemap_url is not None:
                # Known from now on, so its rows are checked for absence even if it is
                # never read whole (an empty digest matches no real one).
                db.execute(
                    "INSERT OR IGNORE INTO sitemaps (seed, url, digest, read_at) "
                    "VALUES (:seed, :url, '', :now)",
                    {**params, "url": sitemap_url},
                )
            db.execute("DELETE FROM temp.chunk")
            db.executemany("INSERT INTO temp.chunk VALUES (?, ?, ?, ?, ?, ?)", rows.values())
            for statement in _APPLY_CHUNK:
                db.execute(statement, params)
        return len(rows)

    @_step
    def apply_lastmod(self) -> LastmodReport:
        """After discovery: decide what the dates that moved mean. Moves that are
        part of a wave (a large share of a host's pages moved to the same minute: a
        deploy stamp) are not evidence of change and make nothing due. Other moves
        are remembered on the row (``lastmod_moved``, the evidence for the host's
        verdict) and make the row due now, unless the host's dates are judged
        ``noisy`` or ``stale``. A share of a trusted host's unmoved rows is checked
        anyway, so a host that starts lying is noticed."""
        report = LastmodReport()
        now = self._clock()
        db = self.database.connection
        buckets = db.execute(
            "SELECT host, substr(lastmod, 1, 16), count(*) FROM temp.moves GROUP BY 1, 2"
        ).fetchall()
        sizes = self._host_sizes({host for host, _minute, _n in buckets})
        report.waves = [
            (host, minute, n)
            for host, minute, n in buckets
            if n >= max(WAVE_MIN_PAGES, self._lastmod.wave_share * sizes.get(host, 0))
        ]
        verdicts = dict(db.execute("SELECT host, verdict FROM hosts").fetchall())
        with self.database.transaction() as db:
            db.execute("DELETE FROM temp.waves")
            db.executemany("INSERT INTO temp.waves VALUES (?, ?)", [w[:2] for w in report.waves])
            db.execute("DELETE FROM temp.deaf")
            db.executemany(
                "INSERT INTO temp.deaf VALUES (?)",
                [(h,) for h, verdict in verdicts.items() if verdict in (NOISY, STALE)],
            )
            for host, minute, n in report.waves:
                db.execute(_COUNT_WAVE, (host,))
                logger.info(
                    "Sitemap dates of %d pages of %s moved to %s at once: a wave "
                    "(a deploy stamp?), not taken as changes",
                    n,
                    host,
                    minute.replace("T", " "),
                )
            report.moved = db.execute("SELECT count(*) FROM temp.moves").fetchone()[0]
            report.due = db.execute(_MOVES_DUE, {"now": now}).rowcount
            db.execute(_MOVES_REMEMBERED)
            db.execute("DELETE FROM temp.moves")
            for host in sorted(h for h, verdict in verdicts.items() if verdict == TRUSTED):
                if db.execute(
                    "SELECT 1 FROM pages WHERE seed = ? AND host = ? LIMIT 1", (self.seed, host)
                ).fetchone():
                    report.sampled += self._sample(db, host, now)
        return report

    def _host_sizes(self, hosts: set[str]) -> dict[str, int]:
        if not hosts:
            return {}
        marks = ", ".join("?" for _ in hosts)
        return dict(
            self.database.execute(
                f"SELECT host, count(*) FROM pages WHERE seed = ? AND host IN ({marks}) "
                "GROUP BY host",
                (self.seed, *hosts),
            ).fetchall()
        )

    def _sample(self, db: Any, host: str, now: float) -> int:
        """Make due a share of *host*'s live rows of this seed that are not, in
        proportion to the time since the last sample (rounded at random, seeded by
        the clock, so a simulation repeats)."""
        row = db.execute("SELECT sampled_at FROM hosts WHERE host = ?", (host,)).fetchone()
        elapsed = now - row[0] if row and row[0] else 3600.0
        waiting = db.execute(
            "SELECT count(*) FROM pages WHERE seed = ? AND host = ? AND gone = 0 "
            "AND next_check > ?",
            (self.seed, host, now),
        ).fetchone()[0]
        wanted = self._lastmod.sample * waiting * elapsed / 86_400.0
        salt = int(now) % 1_000_003
        count = math.floor(wanted) + (((salt * 7919) % 1000) / 1000 < wanted % 1)
        db.execute("UPDATE hosts SET sampled_at = ? WHERE host = ?", (now, host))
        if count <= 0:
            return 0
        return int(
            db.execute(
                "UPDATE pages SET next_check = :now WHERE id IN ("
                "SELECT id FROM pages WHERE seed = :seed AND host = :host AND gone = 0 "
                "AND next_check > :now ORDER BY (id * 2654435761 + :salt) % 4294967296 "
                "LIMIT :count)",
                {"now": now, "seed": self.seed, "host": host, "salt": salt, "count": count},
            ).rowcount
        )

    @_step
    def sitemap_unchanged(self, sitemap_url: str, digest: str) -> bool:
        """Whether *sitemap_url* is exactly what this seed read last time. If so the
        caller need not read it again: its rows stay as they are and are not missing."""
        row = self.database.execute(
            "SELECT digest FROM sitemaps WHERE seed = ? AND url = ?", (self.seed, sitemap_url)
        ).fetchone()
        if row is None or row["digest"] != digest:
            return False
        with self.database.transaction() as db:
            db.execute("INSERT OR IGNORE INTO temp.unchanged VALUES (?)", (sitemap_url,))
        return True

    @_step
    def sitemap_read(self, sitemap_url: str, digest: str) -> None:
        """*sitemap_url* was read whole this run: remember its digest. Rows it
        listed before and no longer lists are no longer attached to it."""
        with self.database.transaction() as db:
            db.execute(
                "UPDATE pages SET sitemap_url = NULL WHERE sitemap_url = ? "
                "AND normalized_url NOT IN temp.seen",
                (sitemap_url,),
            )
            db.execute(
                "INSERT INTO sitemaps (seed, url, digest, read_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (seed, url) DO UPDATE SET digest = excluded.digest, "
                "read_at = excluded.read_at",
                (self.seed, sitemap_url, digest, self._clock()),
            )

    @_step
    def mark_missing(self) -> MissingResult:
        """After a complete discovery: rows of the run's seed it did not see (and
        that no unchanged sitemap lists) get ``missing_runs + 1``; those reaching
        the threshold become due now. Absence never marks a row gone."""
        params = {"seed": self.seed, "now": self._clock(), "n": self._missing_runs}
        with self.database.transaction() as db:
            db.execute("DELETE FROM temp.missing")
            db.execute(_FIND_MISSING, params)
            due = db.execute(
                "SELECT count(*) FROM pages WHERE normalized_url IN temp.missing "
                "AND missing_runs + 1 = :n AND gone = 0",
                params,
            ).fetchone()[0]
            # A gone row no longer listed is counted too: it stops being re-checked.
            marked = db.execute(
                "UPDATE pages SET missing_runs = missing_runs + 1, next_check = CASE "
                "WHEN missing_runs + 1 = :n AND gone = 0 THEN min(next_check, :now) "
                "ELSE next_check END "
                "WHERE normalized_url IN temp.missing",
                params,
            ).rowcount
        return MissingResult(marked=marked, due=due)

    def finish(
        self,
        counts: dict[str, int],
        *,
        discovery_complete: bool | None,
        close_reason: str | None = None,
    ) -> None:
        """Write the run's counts; results still pending are written first, and date
        moves the caller never judged (apply_lastmod) are judged now, not lost."""
        unknown = set(counts) - set(RUN_COUNTS)
        if unknown:
            raise ValueError(f"unknown run counts: {sorted(unknown)}")
        sets = "".join(f"{name} = :{name}, " for name in counts)
        with self.database.mutex:
            if (
                self.database.current_run is self
                and self.database.execute("SELECT 1 FROM temp.moves LIMIT 1").fetchone()
            ):
                self.apply_lastmod()
            self._settle()
            with self.database.transaction() as db:
                db.execute(
                    f"UPDATE runs SET {sets}finished_at = :now, "
                    "discovery_complete = :complete, close_reason = :reason WHERE id = :id",
                    {
                        **counts,
                        "now": self._clock(),
                        "complete": discovery_complete,
                        "reason": close_reason,
                        "id": self.id,
                    },
                )


#: Per-connection tables of the current run: the chunk being applied, every URL
#: seen, sitemaps found unchanged, and rows found missing.
_RUN_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS chunk (normalized_url TEXT PRIMARY KEY, url TEXT, "
    "lastmod TEXT, sitemap_url TEXT, host TEXT, future INTEGER) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS moves ("
    "normalized_url TEXT PRIMARY KEY, host TEXT, lastmod TEXT) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS waves (host TEXT, minute TEXT, PRIMARY KEY (host, minute)) "
    "WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS deaf (host TEXT PRIMARY KEY) WITHOUT ROWID",
    "DELETE FROM temp.moves",
    "CREATE TEMP TABLE IF NOT EXISTS seen (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS unchanged (url TEXT PRIMARY KEY) WITHOUT ROWID",
    "CREATE TEMP TABLE IF NOT EXISTS missing (normalized_url TEXT PRIMARY KEY) WITHOUT ROWID",
    "DELETE FROM temp.chunk",
    "DELETE FROM temp.seen",
    "DELETE FROM temp.unchanged",
    "DELETE FROM temp.missing",
)

_APPLY_CHUNK = (
    # Rows whose lastmod moved: what that means is decided once discovery is over
    # (Run.apply_lastmod), when waves can be told from edits.
    """
    INSERT OR REPLACE INTO temp.moves
    SELECT c.normalized_url, c.host, c.lastmod FROM temp.chunk AS c
    JOIN pages AS p ON p.normalized_url = c.normalized_url
    WHERE p.sitemap_lastmod IS NOT NULL AND c.lastmod IS NOT NULL
      AND p.sitemap_lastmod != c.lastmod AND NOT c.future
    """,
    # Rows seen again belong to this seed now. Driven by the chunk's keys (IN), so
    # each is one primary-key lookup, never a scan.
    """
    UPDATE pages SET
        seed = :seed,
        last_seen = :now,
        missing_runs = 0,
        sitemap_url = coalesce(
            (SELECT c.sitemap_url FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url), sitemap_url),
        sitemap_lastmod = coalesce(
            (SELECT c.lastmod FROM temp.chunk AS c
             WHERE c.normalized_url = pages.normalized_url AND NOT c.future), sitemap_lastmod)
    WHERE normalized_url IN (SELECT normalized_url FROM temp.chunk)
    """,
    # Then rows discovery has never seen: due now, default interval.
    """
    INSERT INTO pages (normalized_url, url, seed, first_seen, last_seen, next_check,
                       interval_s, sitemap_lastmod, sitemap_url, host)
    SELECT c.normalized_url, c.url, :seed, :now, :now, 0, :interval, c.lastmod, c.sitemap_url,
           c.host
    FROM temp.chunk AS c
    WHERE NOT EXISTS (SELECT 1 FROM pages AS p WHERE p.normalized_url = c.normalized_url)
    """,
    "INSERT OR IGNORE INTO temp.seen SELECT normalized_url FROM temp.chunk",
)

_COUNT_FUTURE = (
    "INSERT INTO hosts (host, future_dates) VALUES (?, ?) "
    "ON CONFLICT (host) DO UPDATE SET future_dates = future_dates + excluded.future_dates"
)
_COUNT_WAVE = (
    "INSERT INTO hosts (host, waves) VALUES (?, 1) "
    "ON CONFLICT (host) DO UPDATE SET waves = waves + 1"
)
#: Moves outside waves, on hosts whose dates are heard: due now.
_MOVES_DUE = """
UPDATE pages SET next_check = min(next_check, :now)
WHERE normalized_url IN (
    SELECT m.normalized_url FROM temp.moves AS m
    WHERE NOT EXISTS (SELECT 1 FROM temp.waves AS w
                      WHERE w.host = m.host AND w.minute = substr(m.lastmod, 1, 16))
      AND m.host NOT IN (SELECT host FROM temp.deaf))
"""
#: ...and every move outside a wave is evidence for the host's verdict.
_MOVES_REMEMBERED = """
UPDATE pages SET lastmod_moved = 1
WHERE normalized_url IN (
    SELECT m.normalized_url FROM temp.moves AS m
    WHERE NOT EXISTS (SELECT 1 FROM temp.waves AS w
                      WHERE w.host = m.host AND w.minute = substr(m.lastmod, 1, 16)))
"""


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_FIND_MISSING = """
INSERT OR IGNORE INTO temp.missing
SELECT p.normalized_url FROM pages AS p
WHERE p.sitemap_url IS NULL AND p.seed = :seed
  AND NOT EXISTS (SELECT 1 FROM temp.seen AS s WHERE s.normalized_url = p.normalized_url)
UNION ALL
SELECT p.normalized_url FROM sitemaps AS m JOIN pages AS p ON p.sitemap_url = m.url
WHERE m.seed = :seed AND p.seed = :seed
  AND NOT EXISTS (SELECT 1 FROM temp.unchanged AS u WHERE u.url = m.url)
  AND NOT EXISTS (SELECT 1 FROM temp.seen AS s WHERE s.normalized_url = p.normalized_url)
"""
