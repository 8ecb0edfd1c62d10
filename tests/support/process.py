"""A crawl or a ``scrapy increcrawl`` command as a separate process, the way cron or a
user runs it (for tests that must kill a crawl or read its exit code). The argv and
environment are the demo's own (``scrapy increcrawl demo``, in the wheel)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from increcrawl_scrapy.commands.demo import crawl_command, crawl_env

__all__ = ["crawl_command", "crawl_env", "run_process"]


def run_process(
    command: list[str],
    cwd: str | Path,
    api_key: str | None = None,
    timeout: float = 120,
    **variables: str,
) -> subprocess.CompletedProcess:
    """Run *command* (a crawl, a ``scrapy increcrawl`` command) as a user would, its
    output captured as text; *variables* added to its environment."""
    return subprocess.run(
        command,
        env=crawl_env(api_key, **variables),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
