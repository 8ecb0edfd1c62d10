"""A free port on 127.0.0.1 for a server the tests start (nginx, Scrapyd and
PostgreSQL cannot report a port given as 0)."""

from __future__ import annotations

import contextlib
import random
import socket

#: Below Linux's ephemeral range (32768-60999): a port found free here is not handed
#: to the next socket bound to port 0 (another test's server, seconds later, while
#: a site is being built for this one) nor to an outgoing connection.
_PORTS = (20000, 32767)


def free_port() -> int:
    """A port free on 127.0.0.1 now, drawn at random outside the ephemeral range."""
    for _ in range(100):
        port = random.randint(*_PORTS)  # noqa: S311 - a port, not a secret
        with socket.socket() as sock, contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
