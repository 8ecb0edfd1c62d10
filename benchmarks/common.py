"""What every benchmark shares: workers in subprocesses, peak memory, RESULTS.md."""

from __future__ import annotations

import datetime
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).with_name("RESULTS.md")


def peak_rss_mb() -> float:
    """Peak resident memory of this process, MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_worker(script: str, *args: str, timeout: float = 1800) -> dict[str, Any]:
    """Run ``script --worker ARGS`` in a fresh process; it prints one JSON line."""
    done = subprocess.run(
        [sys.executable, script, "--worker", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=Path(__file__).resolve().parent.parent,
    )
    if done.returncode != 0:
        raise RuntimeError(f"worker {args} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def emit(result: dict[str, Any]) -> None:
    print(json.dumps(result), flush=True)


def machine() -> str:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    versions = [f"Python {platform.python_version()}", f"SQLite {sqlite3.sqlite_version}"]
    for name in ("scrapy", "twisted", "aiohttp", "lxml"):
        try:
            module = __import__(name)
            versions.append(f"{name} {getattr(module, '__version__', '?')}")
        except ImportError:
            pass
    return f"{os.cpu_count()} cores, {memory:.0f} GiB; " + ", ".join(versions)


def commit() -> str:
    """The commit the measured code is at (``+changes`` when the tree differs from it)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short=10", "HEAD"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "increcrawl_scrapy"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+changes" if dirty else "")


def write_section(name: str, body: str) -> None:
    """Replace (or add) section *name* of RESULTS.md, stamped with how it was made."""
    command = "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]])
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- {name} -->\n## {name}\n\n`{command}` at commit {commit()} on {stamp}; "
        f"{machine()}.\n\n"
        f"{body.strip()}\n<!-- /{name} -->\n"
    )
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else (
            "# Benchmark results\n\nWritten by the scripts in this folder; each section says "
            "the command that made it. Ratios compare against a baseline measured in the same "
            "run.\n\n"
        )
    )
    start, end = f"<!-- {name} -->", f"<!-- /{name} -->\n"
    if start in text:
        before, rest = text.split(start, 1)
        text = before + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section
    RESULTS.write_text(text)
    print(section)


def table(headers: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
