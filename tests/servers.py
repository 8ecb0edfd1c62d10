"""Real programs started on 127.0.0.1 for deployment tests: Scrapyd and nginx.

Neither can report a port it was given as 0, so a free port is found first
(``tests.support.ports``, the one place the tests pick a port).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.nginx import free_port, nginx, nginx_binary, wait_until_up

__all__ = ["free_port", "nginx", "nginx_binary", "scrapyd", "wait_until_up", "write_served"]

#: Seconds ahead of now each served write is dated (one more each time).
_LATER = itertools.count(2, 2)


def write_served(path: Path, text: str) -> None:
    """Write a file nginx serves, dated a later second than any before: nginx's ETag is
    the file's mtime and size, so an edit of the same size in the same second would
    answer 304, which no real edit does."""
    path.write_text(text)
    later = time.time() + next(_LATER)
    os.utime(path, (later, later))


REPO = Path(__file__).resolve().parent.parent


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
        wait_until_up(url + "daemonstatus.json", process, status=200)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
