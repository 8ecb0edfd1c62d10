"""Old home of a shared state's leases (``postgres/leases.py``): kept so that
existing imports work."""

from increcrawl_scrapy.state.postgres.leases import (
    Lease,
    claim,
    fence,
    fenced_update,
    held_by_others,
    release,
    renew,
    server_now,
)

__all__ = [
    "Lease",
    "claim",
    "fence",
    "fenced_update",
    "held_by_others",
    "release",
    "renew",
    "server_now",
]
