"""INCRECRAWL_MONTHLY_TOKENS through whole crawls: runs at irregular intervals over
more than a plan month (the clock moved by hand), through the Geonode stand-in, on a
site with more changes than the plan pays for. Each run spends its share of what
is left, the month is never passed, it starts again on the reset day, and what
waits is said in the summary and the stats."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timezone
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.commands.state import _status, _text
from increcrawl_scrapy.schedule.token_plan import period
from increcrawl_scrapy.state import StateStore
from increcrawl_scrapy.testing import GeonodeStandIn, SampleSite
from tests.conftest import Clock
from tests.crawling import KEY, crawl_settings, run_crawl

HOUR, DAY = 3600.0, 86400.0
BUDGET = 60
#: The gaps between runs: a cron job that is late, skips days, runs twice a day.
GAPS = (DAY, 2.5 * DAY, 8 * HOUR, 1.5 * DAY, DAY, 16 * HOUR)


def reset_day_ahead(now: float, days: int) -> int:
    """A reset day *days* after *now* (1 to 28), so the runs cross a reset early."""
    day = datetime.fromtimestamp(now + days * DAY, timezone.utc).day
    return min(day, 28)


@pytest_twisted.ensureDeferred
async def test_a_monthly_budget_is_spread_over_the_runs_and_never_passed(
    tmp_path: Path, clock: Clock
) -> None:
    db = str(tmp_path / "s.sqlite")
    reset_day = reset_day_ahead(clock(), 6)
    first_reset = period(clock() + 6 * DAY + 1, reset_day)[0]
    second_reset = period(first_reset, reset_day)[1]  # a whole plan month after the first
    edits = random.Random(28)
    spent: list[tuple[float, int, dict]] = []  # (start, tokens, stats) of each run
    with SampleSite(pages=40) as site, GeonodeStandIn(api_keys=[KEY]) as api:
        settings = crawl_settings(
            db,
            clock,
            api,
            INCRECRAWL_MONTHLY_TOKENS=BUDGET,
            INCRECRAWL_TOKENS_RESET_DAY=reset_day,
        )
        for gap in itertools.cycle(GAPS):
            for page in edits.sample(range(40), 6):  # more changes than 60 tokens a month
                site.edit(page, at=clock())
            started = clock()
            result = await run_crawl(settings, sitemap_url=site.sitemap_url)
            assert result.reason == "finished"
            tokens = result.stats.get("geonode/tokens_charged", 0)
            assert tokens <= result.stats["increcrawl/budget/month_share"]
            spent.append((started, tokens, result.stats))
            if result.stats.get("increcrawl/budget/month_left"):
                waiting = result.stats["increcrawl/budget/month_left"]
                summary = next(line for line in result.log if "Run summary" in line)
                assert f"left due for a later run: {waiting:,} by INCRECRAWL_MONTHLY_TOKENS" in (
                    summary
                )
                assert "tokens: " in summary and f"plan {BUDGET}: " in summary
            if started >= second_reset:  # a run of the third plan month: enough
                break
            clock.advance(gap)

    months: dict[float, list[tuple[float, int, dict]]] = {}
    for run in spent:
        months.setdefault(period(run[0], reset_day)[0], []).append(run)
    assert len(months) == 3  # before the first reset, a whole month, after the second
    for start, runs in months.items():
        total = sum(tokens for _, tokens, _ in runs)
        assert total <= BUDGET, (start, [tokens for _, tokens, _ in runs])
        # Its first run starts from the whole plan (the reset), each from what is left.
        assert runs[0][2]["increcrawl/budget/month_tokens_left"] == BUDGET
        left = [stats["increcrawl/budget/month_tokens_left"] for _, _, stats in runs]
        assert left == [BUDGET - sum(t for _, t, _ in runs[:i]) for i in range(len(runs))]
    whole = months[first_reset]
    # The whole month is spent (its last run takes what is left), not all at once: no
    # run takes more than a few days' worth.
    assert sum(tokens for _, tokens, _ in whole) >= 0.95 * BUDGET
    assert max(tokens for _, tokens, _ in whole[:-1]) <= BUDGET / 4
    assert len([1 for _, tokens, _ in whole if tokens]) >= len(whole) - 2
    # Pages waited for the budget: the site changed more than the plan pays for.
    assert sum(stats.get("increcrawl/budget/month_left", 0) for _, _, stats in whole) > 0

    # `status` (and the report, which reads the same figures) say the month.
    with StateStore(db, clock=clock) as store:
        report = _status(store.reader(), clock(), reset_day, BUDGET)
    tokens = report["tokens"]
    last_month = months[max(months)]
    assert tokens["month"] == sum(t for _, t, _ in last_month)
    assert tokens["week"] == sum(t for started, t, _ in spent if started >= clock() - 7 * DAY)
    assert tokens["budget"] == BUDGET and tokens["month_start"] == max(months)
    assert tokens["projected"] >= tokens["month"]
    line = _text(report).splitlines()[-1]
    assert line.startswith(f"tokens: {tokens['week']:,} in the last 7 days, {tokens['month']:,}")
    assert f"plan {BUDGET}: {BUDGET - tokens['month']} left" in line
