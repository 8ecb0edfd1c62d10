"""Open a file in headless Chromium (Debian's ``chromium``) as a user's browser
would: the DOM after its scripts ran, the console's errors, a screenshot."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import lxml.html

# Chromium logs each console message to stderr with --enable-logging=stderr.
_CONSOLE_ERROR = re.compile(r"CONSOLE.*(?:Uncaught|Error|error)|:ERROR:CONSOLE")


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Opened:
    dom: lxml.html.HtmlElement
    console_errors: list[str]


def _run(binary: str, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",  # tests run as root in CI containers
                "--disable-gpu",
                # No network: every request fails, so the file must carry all it needs.
                "--proxy-server=127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )


def open_file(path: Path) -> Opened:
    binary = chromium()
    assert binary, "chromium is not installed (.ci/run installs it)"
    done = _run(binary, "--dump-dom", path.resolve().as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    errors = [line for line in done.stderr.splitlines() if _CONSOLE_ERROR.search(line)]
    return Opened(dom=lxml.html.fromstring(done.stdout), console_errors=errors)


def screenshot(path: Path, png: Path, size: str = "1280,2600") -> None:
    binary = chromium()
    assert binary
    png.parent.mkdir(parents=True, exist_ok=True)
    done = _run(
        binary,
        f"--screenshot={png}",
        f"--window-size={size}",
        "--hide-scrollbars",
        path.resolve().as_uri(),
    )
    assert done.returncode == 0 and png.exists() and png.stat().st_size > 10_000, done.stderr[
        -2000:
    ]
