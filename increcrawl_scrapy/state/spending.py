"""The runs' tokens, read for ``schedule/token_plan.py``, which computes from them:
what a state's runs spent this week and this plan month, and a run's share."""

from __future__ import annotations

from increcrawl_scrapy.schedule import token_plan
from increcrawl_scrapy.state.backend import Session


def spending_runs(db: Session, since: float) -> list[tuple[float, int]]:
    """``(started_at, tokens_charged)`` of every seed's runs started since *since*
    (a plan belongs to an API key, not to a seed)."""
    rows = db.execute(db.sql.spending_runs, (since,)).fetchall()
    return [(float(row[0]), int(row[1] or 0)) for row in rows]


def token_figures(db: Session, at: float, reset_day: int, budget: int) -> token_plan.TokenFigures:
    """The tokens of the state's runs this week and this plan month."""
    runs = spending_runs(db, token_plan.since(at, reset_day))
    return token_plan.figures(runs, at, reset_day, budget)


def month_share(db: Session, at: float, reset_day: int, budget: int) -> token_plan.MonthShare:
    """A run's share of INCRECRAWL_MONTHLY_TOKENS (the run's own row is already in
    ``runs``: it starts a gap)."""
    start, _ = token_plan.period(at, reset_day)
    spent = sum(tokens for _, tokens in spending_runs(db, start))
    rows = db.execute(db.sql.recent_run_starts, (token_plan.INTERVAL_RUNS,))
    starts = [float(row[0]) for row in rows]
    return token_plan.run_share(spent, starts, at, reset_day, budget)
