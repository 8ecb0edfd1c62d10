"""A throwaway PostgreSQL server on 127.0.0.1, for tests and benchmarks.

Debian's binaries (``/usr/lib/postgresql/N/bin``) or any on PATH: ``initdb`` into a
temporary directory, trust authentication, a free port, a socket directory of its
own; stopped and deleted afterwards. As root (CI), the server runs as the
``postgres`` user, since PostgreSQL refuses to run as root.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.ports import free_port

SUPERUSER = "increcrawl"


def binaries() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl``, newest version first; None if absent."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


class ThrowawayPostgres:
    """``with ThrowawayPostgres() as server: server.dsn(...)``."""

    def __init__(self) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("PostgreSQL is not installed (no initdb)")
        self.bin = bin_dir
        self.port = free_port()
        self._root: str | None = None

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> ThrowawayPostgres:
        self._root = tempfile.mkdtemp(prefix="increcrawl-pg-")
        data, sockets = f"{self._root}/data", f"{self._root}/sockets"
        os.mkdir(sockets)
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            for path in (self._root, sockets):
                os.chown(path, account.pw_uid, account.pw_gid)
        self._run("initdb", "-D", data, "-U", SUPERUSER, "-A", "trust", "--no-sync", "-E", "UTF8")
        self._run(
            "pg_ctl", "-D", data, "-o", self._options(), "-l", f"{self._root}/log", "-w", "start"
        )
        return self

    def _options(self) -> str:
        sockets = f"{self._root}/sockets"
        return f"-p {self.port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"

    def restart(self) -> None:
        """Stop the server at once (as a crash would: every connection drops) and
        start it again on the same port."""
        self.halt()
        self.resume()

    def halt(self) -> None:
        """Stop the server at once, its data kept (``resume`` starts it again)."""
        self._run("pg_ctl", "-D", f"{self._root}/data", "-m", "immediate", "-w", "stop")

    def resume(self) -> None:
        data = f"{self._root}/data"
        self._run(
            "pg_ctl", "-D", data, "-o", self._options(), "-l", f"{self._root}/log", "-w", "start"
        )

    def stop(self) -> None:
        if self._root is None:
            return
        try:
            self._run("pg_ctl", "-D", f"{self._root}/data", "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

    def create_database(self, name: str) -> str:
        """A new empty database; its DSN."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bin / tool), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            log = Path(f"{self._root}/log")
            detail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stderr[-2000:]}{detail}")

    def __enter__(self) -> ThrowawayPostgres:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
