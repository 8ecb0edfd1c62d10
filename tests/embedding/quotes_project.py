"""examples/quotes crawled for real: ``scrapy crawl`` in the project, a run at a time,
with a moved clock (the tests of the two project shapes share it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from increcrawl_scrapy.testing import GeonodeStandIn
from increcrawl_scrapy.testing.quotes import QuotesSite
from tests.servers import REPO

QUOTES = REPO / "examples" / "quotes"
HOUR, DAY = 3_600.0, 86_400.0
KEY = "quotes-key-0123456789"


class Project:
    def __init__(
        self, tmp_path: Path, site: QuotesSite, spider: str, api: GeonodeStandIn | None = None
    ) -> None:
        self.tmp, self.site, self.spider, self.api = tmp_path, site, spider, api
        self.url = site.url  # also once the site is stopped
        self.now = 1_800_000_000.0
        (tmp_path / "tclock.py").write_text(
            f"def now():\n    return float(open({str(tmp_path / 'now')!r}).read())\n"
        )
        self.runs = 0
        self.log = ""
        self.db = str(tmp_path / "state.sqlite")  # or a PostgreSQL DSN

    def crawl(self, *args: str, advance: float = 0, stop_at: str = "") -> list[dict]:
        """One run; with *stop_at*, sent SIGTERM (a graceful shutdown, as a service
        manager stops it) once its log has a line with that text."""
        self.now += advance
        (self.tmp / "now").write_text(str(self.now))
        self.runs += 1
        self.site.reset_counters()
        feed = self.tmp / f"run{self.runs}.jsonl"
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("GEONODE_API_KEY", "SCRAPY_SETTINGS_MODULE")
        }
        env["PYTHONPATH"] = os.pathsep.join([str(self.tmp), env.get("PYTHONPATH", "")])
        env["PYTHONFAULTHANDLER"] = "1"  # a crash says where (CI saw one exit unsaid)
        command = [
            sys.executable, "-m", "scrapy", "crawl", self.spider,
            "-a", f"start_url={self.url}/", *args,
            "-o", f"{feed}:jsonlines",
            "-s", f"INCRECRAWL_DB={self.db}",
            "-s", "INCRECRAWL_CLOCK=tclock.now",
            "-s", "TELNETCONSOLE_ENABLED=False",
        ]  # fmt: skip
        if self.api is not None:  # pages fetched through the Geonode API
            env["GEONODE_API_KEY"] = KEY
            command += ["-s", f"GEONODE_API_URL={self.api.url}"]
        if stop_at:
            returncode, self.log = _stopped(command, env, stop_at)
        else:
            done = subprocess.run(
                command, cwd=QUOTES, env=env, capture_output=True, text=True, timeout=600
            )
            returncode, self.log = done.returncode, done.stderr
        assert returncode == 0, f"exit {returncode}\n{self.log[-3000:]}"
        return [json.loads(line) for line in feed.read_text().splitlines()] if feed.exists() else []

    def stat(self, name: str) -> int:
        for line in self.log.splitlines():
            if f"'{name}':" in line:
                return int(line.split(":")[-1].strip().rstrip(",}"))
        return 0

    @property
    def fetched(self) -> int:
        """Pages the site answered in full this run (not 304)."""
        return sum(self.site.requested.values()) - sum(self.site.not_modified.values())


def _stopped(command: list[str], env: dict[str, str], stop_at: str) -> tuple[int, str]:
    with subprocess.Popen(
        command, cwd=QUOTES, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    ) as crawl:
        assert crawl.stderr is not None
        lines, sent = [], False
        for line in crawl.stderr:
            lines.append(line)
            if not sent and stop_at in line:
                crawl.send_signal(signal.SIGTERM)  # once: a second is not graceful
                sent = True
        return crawl.wait(timeout=600), "".join(lines)


def delivered(items: list[dict]) -> list[tuple[str, str]]:
    return sorted((item["change"], item["text"]) for item in items)
