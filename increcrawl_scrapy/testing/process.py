"""``scrapy crawl incremental`` as a separate process, the way cron or a user runs it
(for the demo and for tests that must kill a crawl)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def crawl_command(
    sitemap_url: str,
    db: str | Path,
    *settings: str,
    api_url: str | None = None,
    feed: str | Path | None = None,
) -> list[str]:
    """The argv of one crawl; *settings* are ``NAME=value`` pairs."""
    command = [
        sys.executable,
        "-m",
        "scrapy",
        "crawl",
        "incremental",
        "-a",
        f"sitemap_url={sitemap_url}",
        "-s",
        f"INCRECRAWL_DB={db}",
    ]
    if api_url:
        command += ["-s", f"GEONODE_API_URL={api_url}"]
    if feed:
        command += ["-O", str(feed)]
    for setting in settings:
        command += ["-s", setting]
    return command


def crawl_env(api_key: str | None, **variables: str) -> dict[str, str]:
    """This environment, with the key (the only place it is ever put) and the project."""
    env = {k: v for k, v in os.environ.items() if k != "GEONODE_API_KEY"}
    if api_key:
        env["GEONODE_API_KEY"] = api_key
    env["SCRAPY_SETTINGS_MODULE"] = "increcrawl_scrapy.settings"
    env.update(variables)
    return env


def run_process(
    command: list[str],
    cwd: str | Path,
    api_key: str | None = None,
    timeout: float = 120,
    **variables: str,
) -> subprocess.CompletedProcess:
    """Run *command* (a crawl, a ``scrapy increcrawl`` command) as a user would, its
    output captured as text; *variables* added to its environment."""
    return subprocess.run(  # noqa: S603 - argv built by the caller, no shell
        command,
        env=crawl_env(api_key, **variables),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
