"""A free port on 127.0.0.1 for a server the tests start (nginx, Scrapyd and
PostgreSQL cannot report a port given as 0)."""

from __future__ import annotations

import contextlib
import random
import socket
from pathlib import Path

_LOWEST = 20000
_DRAW = random.SystemRandom()  # not the test's seeded generator: workers draw apart


def free_port() -> int:
    """A port free on 127.0.0.1 now, drawn at random below the kernel's ephemeral
    range: a port found there is soon handed to the next socket bound to port 0
    (another test's server, while a site is being built for this one) or to an
    outgoing connection."""
    highest = ephemeral_ports()[0] - 1
    for _ in range(100 if highest > _LOWEST else 0):
        port = _DRAW.randint(_LOWEST, highest)
        with socket.socket() as sock, contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ports for port-0 sockets (Linux's default elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999
