"""What sitemap dates that moved mean: waves (a deploy stamping every page) told
from edits, the hosts whose dates are not heard, and the sample of a trusted
host's pages checked anyway. Applied once per discovery (``Run.apply_lastmod``)."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

from increcrawl_scrapy.rows import NOISY, TRUSTED
from increcrawl_scrapy.state.database import Database

logger = logging.getLogger(__name__)

#: A wave needs at least this many pages as well as its share of the host.
WAVE_MIN_PAGES = 10
#: A trusted host's pages are sampled at most this often (seconds).
SAMPLE_EVERY = 86_400.0


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


def apply_moves(database: Database, seed: str, rules: LastmodRules, now: float) -> LastmodReport:
    """After discovery: decide what the dates that moved mean. Moves that are
    part of a wave (a large share of a host's pages moved to the same minute: a
    deploy stamp) are not evidence of change and make nothing due. Other moves
    are remembered on the row (``lastmod_moved``, the evidence for the host's
    verdict) and make the row due now, unless the host's dates are judged
    ``noisy``. A share of a trusted host's unmoved rows is checked
    anyway, so a host that starts lying is noticed."""
    report = LastmodReport()
    db = database.connection
    buckets = db.execute(
        "SELECT host, substr(lastmod, 1, 16), count(*) FROM temp.moves GROUP BY 1, 2"
    ).fetchall()
    # A wave needs WAVE_MIN_PAGES first: most runs need no host's size.
    candidates = {host for host, _minute, n in buckets if n >= WAVE_MIN_PAGES}
    sizes = _host_sizes(database, seed, candidates)
    report.waves = [
        (host, minute, n)
        for host, minute, n in buckets
        if n >= max(WAVE_MIN_PAGES, rules.wave_share * sizes.get(host, 0))
    ]
    verdicts = dict(db.execute("SELECT host, verdict FROM hosts").fetchall())
    with database.transaction() as db:
        db.execute("DELETE FROM temp.waves")
        db.executemany("INSERT INTO temp.waves VALUES (?, ?)", [w[:2] for w in report.waves])
        db.execute("DELETE FROM temp.deaf")
        db.executemany(
            "INSERT INTO temp.deaf VALUES (?)",
            # Stale dates still mean a change when they move (precision is not what
            # failed them); noisy ones do not.
            [(h,) for h, verdict in verdicts.items() if verdict == NOISY],
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
                "SELECT 1 FROM pages WHERE seed = ? AND host = ? LIMIT 1", (seed, host)
            ).fetchone():
                report.sampled += _sample(db, seed, host, now, rules.sample)
    return report


def _host_sizes(database: Database, seed: str, hosts: set[str]) -> dict[str, int]:
    if not hosts:
        return {}
    marks = ", ".join("?" for _ in hosts)
    return dict(
        database.execute(
            f"SELECT host, count(*) FROM pages WHERE seed = ? AND host IN ({marks}) GROUP BY host",
            (seed, *hosts),
        ).fetchall()
    )


def _sample(db: Any, seed: str, host: str, now: float, share: float) -> int:
    """Make due a share of *host*'s live rows of this seed that are not, in
    proportion to the time since the last sample (rounded at random, seeded by
    the clock, so a simulation repeats). At most once a SAMPLE_EVERY: counting a
    host's rows is a scan, not something every hourly run should pay."""
    row = db.execute("SELECT sampled_at FROM hosts WHERE host = ?", (host,)).fetchone()
    if row is None or row[0] is None:
        db.execute("UPDATE hosts SET sampled_at = ? WHERE host = ?", (now, host))
        return 0
    elapsed = now - row[0]
    if elapsed < SAMPLE_EVERY:
        return 0
    waiting = db.execute(
        "SELECT count(*) FROM pages WHERE seed = ? AND host = ? AND gone = 0 AND next_check > ?",
        (seed, host, now),
    ).fetchone()[0]
    wanted = share * waiting * elapsed / 86_400.0
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
            {"now": now, "seed": seed, "host": host, "salt": salt, "count": count},
        ).rowcount
    )


_COUNT_WAVE = (
    "INSERT INTO hosts (host, waves) VALUES (?, 1) "
    "ON CONFLICT (host) DO UPDATE SET waves = hosts.waves + 1"
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
