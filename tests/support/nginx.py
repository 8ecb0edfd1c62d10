"""nginx serving a folder on 127.0.0.1: a real web server as the origin of tests
and benchmarks (its own ETag, Last-Modified and 304). Neither nginx nor Scrapyd can
report a port given as 0, so a free port is found first (``free_port``)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import requests

from tests.support.ports import free_port

__all__ = ["free_port", "nginx", "nginx_binary", "wait_until_up"]


def wait_until_up(
    url: str, process: subprocess.Popen, seconds: float = 180, status: int | None = None
) -> None:
    """Wait until *url* answers (with *status*, when given: another server on the
    port answers otherwise, and is never taken for this one). *seconds* bound a hang,
    not a start: a process that exits is said at once, and a busy machine may take
    a minute to start Scrapyd (each slow answer is asked again)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        with contextlib.suppress(requests.ConnectionError, requests.Timeout):
            answer = requests.get(url, timeout=10)
            if status is None or answer.status_code == status:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up in {seconds}s")


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


@contextlib.contextmanager
def nginx(
    root: Path, workdir: Path, port: int | None = None, extra: str = ""
) -> Iterator[tuple[str, Path]]:
    """nginx serving *root* on 127.0.0.1 (on *port*, else a free one, with *extra*
    directives in its server block); yields its URL and its access log."""
    binary = nginx_binary()
    assert binary, "nginx is not installed"
    port = port or free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    access = workdir / "access.log"
    alive = f"/.increcrawl-up-{secrets.token_hex(8)}"  # answered by this nginx only
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers must read the test's files
    (workdir / "nginx.conf").write_text(
        f"{user}daemon off;\nworker_processes 1;\npid {workdir / 'nginx.pid'};\n"
        f"error_log {workdir / 'error.log'};\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        "  log_format cond escape=none '$status $request_uri inm=[$http_if_none_match] "
        "ims=[$http_if_modified_since]';\n"
        f"  access_log {access} cond;\n"
        f"  client_body_temp_path {workdir};\n  proxy_temp_path {workdir};\n"
        f"  fastcgi_temp_path {workdir};\n  uwsgi_temp_path {workdir};\n"
        f"  scgi_temp_path {workdir};\n"
        "  types { text/html html; application/xml xml; text/plain txt; "
        "application/pdf pdf; application/json json; text/css css; }\n"
        f"  server {{ listen 127.0.0.1:{port}; root {root}; etag on; "
        f"location = {alive} {{ access_log off; return 204; }} {extra} }}\n"
        "}\n"
    )
    process = subprocess.Popen(
        [binary, "-p", str(workdir), "-c", str(workdir / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url + alive, process, status=204)
        yield url, access
    finally:
        process.terminate()
        process.wait(timeout=15)
