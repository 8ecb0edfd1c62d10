"""The package as a whole: importable everywhere Scrapy runs, stats keys named in one
place, every module small (that every key is documented: tests/package/test_docs.py)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WITHOUT_FCNTL = """
import sys
sys.modules["fcntl"] = None  # as on Windows: importing it raises ImportError
import increcrawl_scrapy, increcrawl_scrapy.state, increcrawl_scrapy.spiders.incremental
from increcrawl_scrapy.state import StateStore, StateLockedError
path = sys.argv[1]
with StateStore(path, exclusive=True):
    try:
        StateStore(path, exclusive=True)
    except StateLockedError as exc:
        print("locked:", exc)
"""


def test_the_package_works_without_fcntl(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_FCNTL, str(tmp_path / "s.sqlite")],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "locked:" in done.stdout and "in use by another crawl" in done.stdout


def test_the_code_names_stats_keys_only_through_the_stats_module() -> None:
    literal = re.compile(r"[\"'](?:increcrawl|geonode)/[a-z_{}/]+[\"']")
    for path in (REPO / "increcrawl_scrapy").rglob("*.py"):
        if path.name == "stats.py" or "testing" in path.parts:
            continue
        found = [m.group(0) for m in literal.finditer(path.read_text())]
        assert found == [], f"{path.relative_to(REPO)}: {found}"


def test_modules_stay_small() -> None:
    sizes = {
        path.relative_to(REPO).as_posix(): len(path.read_text().splitlines())
        for path in (REPO / "increcrawl_scrapy").rglob("*.py")
        if "testing" not in path.parts  # the stand-in and the sample site
    }
    assert {name: n for name, n in sizes.items() if n > 430} == {}


#: Every ``scrapy`` command where this package is installed loads its ``increcrawl``
#: command (an entry point); in a project on its settings (``COMMANDS_MODULE``) Scrapy
#: imports every module of ``increcrawl_scrapy.commands``, as here, and a crawl the spider.
COMMAND_IMPORTS = """
import importlib, pkgutil, sys
import increcrawl_scrapy.commands as commands
for module in pkgutil.iter_modules(commands.__path__):
    importlib.import_module(f"{commands.__name__}.{module.name}")
import increcrawl_scrapy.spiders.incremental
only = ("psycopg", "requests", "increcrawl_scrapy.testing.geonode",
        "increcrawl_scrapy.testing.site")
print(" ".join(sorted(m for m in only if m in sys.modules)))
"""


def test_commands_do_not_import_what_only_some_of_them_use() -> None:
    """psycopg (a PostgreSQL state only) costs every ``scrapy`` command about 60 ms to
    import: it waits until it is used. So does requests (``increcrawl check`` only),
    though a crawl loads it anyway (Scrapy's tldextract), and the stand-in API and
    sample site (``increcrawl demo`` only, about 25 ms)."""
    done = subprocess.run(
        [sys.executable, "-c", COMMAND_IMPORTS],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == []
