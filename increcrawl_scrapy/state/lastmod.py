"""What sitemap dates that moved mean: waves (a deploy stamping every page) told
from edits, the hosts whose dates are not heard, and the sample of a trusted
host's pages checked anyway. Applied once per discovery (``Run.apply_lastmod``)."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field

from increcrawl_scrapy.schedule.rows import NOISY, TRUSTED
from increcrawl_scrapy.state.backend import Backend, Session

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


def apply_moves(database: Backend, seed: str, rules: LastmodRules, now: float) -> LastmodReport:
    """After discovery: decide what the dates that moved mean. Moves that are
    part of a wave (a large share of a host's pages moved to the same minute: a
    deploy stamp) are not evidence of change and make nothing due. Other moves
    are remembered on the row (``lastmod_moved``, the evidence for the host's
    verdict) and make the row due now, unless the host's dates are judged
    ``noisy``. A share of a trusted host's unmoved rows is checked
    anyway, so a host that starts lying is noticed."""
    report = LastmodReport()
    sql = database.sql
    buckets = database.execute(sql.move_buckets).fetchall()
    # A wave needs WAVE_MIN_PAGES first: most runs need no host's size.
    candidates = {host for host, _minute, n in buckets if n >= WAVE_MIN_PAGES}
    sizes = _host_sizes(database, seed, candidates)
    report.waves = [
        (host, minute, n)
        for host, minute, n in buckets
        if n >= max(WAVE_MIN_PAGES, rules.wave_share * sizes.get(host, 0))
    ]
    verdicts = dict(database.execute(sql.host_verdicts).fetchall())
    with database.transaction() as db:
        db.execute(sql.clear_waves)
        db.executemany(sql.add_wave, [w[:2] for w in report.waves])
        db.execute(sql.clear_deaf)
        db.executemany(
            sql.add_deaf,
            # Stale dates still mean a change when they move (precision is not what
            # failed them); noisy ones do not.
            [(h,) for h, verdict in verdicts.items() if verdict == NOISY],
        )
        for host, minute, n in report.waves:
            db.execute(sql.count_wave, (host,))
            logger.info(
                "Sitemap dates of %d pages of %s moved to %s at once: a wave "
                "(a deploy stamp?), not taken as changes",
                n,
                host,
                minute.replace("T", " "),
            )
        report.moved = db.execute(sql.count_moves).fetchone()[0]
        report.due = db.execute(sql.moves_due, {"now": now}).rowcount
        db.execute(sql.moves_remembered)
        db.execute(sql.clear_moves)
        for host in sorted(h for h, verdict in verdicts.items() if verdict == TRUSTED):
            if db.execute(sql.seed_has_host, (seed, host)).fetchone():
                report.sampled += _sample(db, seed, host, now, rules.sample)
    return report


def _host_sizes(database: Backend, seed: str, hosts: set[str]) -> dict[str, int]:
    if not hosts:
        return {}
    rows = database.execute(database.sql.host_sizes, (seed, json.dumps(sorted(hosts))))
    return dict(rows.fetchall())


def _sample(db: Session, seed: str, host: str, now: float, share: float) -> int:
    """Make due a share of *host*'s live rows of this seed that are not, in
    proportion to the time since the last sample (rounded at random, seeded by
    the clock, so a simulation repeats). At most once a SAMPLE_EVERY: counting a
    host's rows is a scan, not something every hourly run should pay."""
    row = db.execute(db.sql.sampled_at, (host,)).fetchone()
    if row is None or row[0] is None:
        db.execute(db.sql.set_sampled_at, (now, host))
        return 0
    elapsed = now - row[0]
    if elapsed < SAMPLE_EVERY:
        return 0
    waiting = db.execute(db.sql.count_waiting, (seed, host, now)).fetchone()[0]
    wanted = share * waiting * elapsed / 86_400.0
    salt = int(now) % 1_000_003
    count = math.floor(wanted) + (((salt * 7919) % 1000) / 1000 < wanted % 1)
    db.execute(db.sql.set_sampled_at, (now, host))
    if count <= 0:
        return 0
    return int(
        db.execute(
            db.sql.sample_due,
            {"now": now, "seed": seed, "host": host, "salt": salt, "count": count},
        ).rowcount
    )
