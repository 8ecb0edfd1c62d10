"""The change queue on a shared state, against a claims stand-in that plays the
race a real server allows: leases another worker held run out between this
worker's claim and its question whether others still hold rows."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from increcrawl_scrapy.schedule.rows import PageState
from increcrawl_scrapy.state.queue import ChangeQueue


def page(url: str) -> PageState:
    fields = dict.fromkeys(PageState._fields)
    fields.update(normalized_url=url, url=url, seed="https://a.test/s.xml", next_check=0.0)
    return PageState(**fields)


class ExpiringClaims:
    """The first claim finds every row leased by a dead worker; by the time the
    worker asks whether others hold rows, those leases have run out."""

    def __init__(self, rows: list[PageState]) -> None:
        self.rows = rows
        self.claims = 0

    def claim(self, seed: str, size: int, until: float, skip: Any = None) -> tuple:
        self.claims += 1
        if self.claims == 1:
            return [], [], {}
        taken, self.rows = self.rows[:size], self.rows[size:]
        return taken, [], {}

    def others_lease(self, seed: str) -> bool:
        return False  # the dead worker's leases expired just now


def test_leases_running_out_between_a_claim_and_the_check_leave_no_row_behind() -> None:
    rows = [page(f"https://a.test/{i}") for i in range(3)]
    claims = ExpiringClaims(rows)
    results = SimpleNamespace(
        database=None,
        claims=claims,
        clock=lambda: 1_000.0,
        before_claim=lambda until: set(),
        keep_claimed=lambda pages, leases, counts: None,
    )
    queue = ChangeQueue(results)  # type: ignore[arg-type]
    got = [page for chunk in queue.chunks("https://a.test/s.xml", wait=True) for page in chunk]
    assert [page.normalized_url for page in got] == [page.normalized_url for page in rows]
