"""The real servers the tests start on 127.0.0.1 are the ones they talk to."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path

import pytest

from tests.support.nginx import nginx, nginx_binary
from tests.support.ports import ephemeral_ports, free_port


@pytest.mark.e2e
def test_nginx_never_takes_another_server_on_its_port_for_itself(tmp_path: Path) -> None:
    """A port found free can be taken before nginx binds it (another test's server,
    while this one builds its site): nginx then fails to start, and must say so,
    not hand the test the other server's site (a crawl of the wrong site, once)."""
    if not nginx_binary():
        pytest.skip("nginx is not installed (.ci/run installs it)")
    port = free_port()
    other = http.server.HTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        with pytest.raises(RuntimeError, match="exited"), nginx(tmp_path, tmp_path / "n", port):
            pass
    finally:
        other.shutdown()
        other.server_close()


def test_a_free_port_is_outside_the_range_the_kernel_hands_out() -> None:
    """Ports bound to 0 and outgoing connections come from the ephemeral range: a
    port drawn there is soon handed to another test's server too."""
    low, high = ephemeral_ports()
    ports = {free_port() for _ in range(20)}
    assert not any(low <= port <= high for port in ports)
    assert len(ports) > 1
