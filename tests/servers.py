"""Real programs started on 127.0.0.1 for deployment tests: Scrapyd and nginx.

Neither can report a port it was given as 0, so a free port is found first by
binding to port 0 (the one place the tests pick a port).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_up(url: str, process: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args[0]} exited with {process.returncode}")
        with contextlib.suppress(requests.ConnectionError):
            requests.get(url, timeout=2)
            return
        time.sleep(0.1)
    raise RuntimeError(f"{url} did not come up in {seconds}s")


@contextlib.contextmanager
def scrapyd(workdir: Path, env: dict[str, str]) -> Iterator[str]:
    """A real Scrapyd in *workdir*, with *env* added to its environment (and its jobs')."""
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        "bind_address = 127.0.0.1\n"
        f"http_port = {port}\n"
        "poll_interval = 0.2\n"
        "max_proc = 2\n"
        f"eggs_dir = {workdir / 'eggs'}\n"
        f"logs_dir = {workdir / 'logs'}\n"
        f"items_dir = {workdir / 'items'}\n"
        f"dbs_dir = {workdir / 'dbs'}\n"
    )
    executable = shutil.which("scrapyd", path=str(Path(sys.executable).parent)) or "scrapyd"
    log = (workdir / "scrapyd.out").open("wb")
    process = subprocess.Popen(
        [executable], cwd=workdir, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_until_up(url + "daemonstatus.json", process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def nginx_binary() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )


@contextlib.contextmanager
def nginx(root: Path, workdir: Path) -> Iterator[tuple[str, Path]]:
    """nginx serving *root* on 127.0.0.1; yields its URL and its access log."""
    binary = nginx_binary()
    assert binary, "nginx is not installed"
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    access = workdir / "access.log"
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
        "  types { text/html html; application/xml xml; text/plain txt; }\n"
        f"  server {{ listen 127.0.0.1:{port}; root {root}; etag on; }}\n"
        "}\n"
    )
    process = subprocess.Popen(
        [binary, "-p", str(workdir), "-c", str(workdir / "nginx.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url + "/", process)
        yield url, access
    finally:
        process.terminate()
        process.wait(timeout=15)
