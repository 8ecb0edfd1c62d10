from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.crawling import KEY


class Clock:
    """A clock the test moves by hand (Unix seconds)."""

    def __init__(self, now: float | None = None) -> None:
        # Real time to start with: the sample site dates its edits with the real
        # clock, and a sitemap date after the crawl's clock is one in the future.
        self.now = float(int(time.time())) if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True, scope="session")
def _public_suffixes_offline() -> None:
    """Scrapy's cookies middleware reads the Public Suffix List with tldextract, which
    fetches it from publicsuffix.org on first use (a fresh machine has no cache): tests
    send no traffic off this machine, so in-process crawls read the snapshot tldextract
    ships (a WARNING and a traceback in the log otherwise, where no network is)."""
    try:
        from scrapy.downloadermiddlewares import cookies
        from tldextract import TLDExtract
    except ImportError:
        return
    if hasattr(cookies, "_split_domain"):
        cookies._split_domain = TLDExtract(suffix_list_urls=(), include_psl_private_domains=True)


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """A test that leaves the root logger at another level, or with a handler more or
    less, fails: the next tests in its process would log (and pytest keep) otherwise.
    A root left at DEBUG kept every response in pytest's captured records, and a
    later test counting the objects alive failed, in that process only."""
    from scrapy.utils.log import LogCounterHandler

    root = logging.getLogger()

    def now() -> tuple[int, list[logging.Handler]]:
        # Not Scrapy's own counter: Scrapy 2.13 leaves it on the root logger for a
        # crawler that never crawls (removed when its engine stops).
        return root.level, [h for h in root.handlers if not isinstance(h, LogCounterHandler)]

    found = now()
    yield
    left = now()
    if left != found:
        root.setLevel(found[0])
        root.handlers[:] = found[1]
        pytest.fail(f"the root logger was left changed: {found} -> {left}", pytrace=False)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def site():
    from increcrawl_scrapy.testing import SampleSite

    with SampleSite(pages=12) as running:
        yield running


@pytest.fixture
def api():
    from increcrawl_scrapy.testing import GeonodeStandIn

    with GeonodeStandIn(api_keys=["test-key", KEY]) as running:
        yield running


@pytest.fixture(scope="session")
def postgres_server():
    """A throwaway PostgreSQL server for the session; skipped (one line) where none is
    installed, except under CI, where the PostgreSQL tests must run."""
    from tests.support.postgres import ThrowawayPostgres, binaries

    try:
        import psycopg  # noqa: F401
    except ImportError:
        reason = "PostgreSQL tests need psycopg (pip install -e '.[test]')"
    else:
        reason = "PostgreSQL tests need PostgreSQL installed (initdb)" if not binaries() else ""
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    with ThrowawayPostgres() as server:
        yield server


@pytest.fixture
def postgres_dsn(postgres_server) -> str:
    """A new, empty database on the session's server."""
    return postgres_server.create_database(f"test_{uuid.uuid4().hex[:12]}")


#: Modules whose tests run whole crawls in processes of their own, or long simulations:
#: the quick selection (``pytest -m "not e2e and not slow"``) leaves them out, the whole
#: suite (``pytest``, as .ci/run runs it) keeps them.
SLOW_MODULES = frozenset(
    {
        "test_bad_state",
        "test_catalog_project",
        "test_commands",
        "test_crashes",
        "test_exit_codes",
        "test_memory_bound",
        "test_no_signal_rates",
        "test_noisy_and_diff",
        "test_nothing_lost",
        "test_postgres_commands",
        "test_postgres_state",
        "test_simulator",
        "test_state_commands",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Test modules live in folders by wing (tests/<wing>/test_*.py); their stems are
    # unique across the folders, so a stem names one module.
    modules = [path.stem for path in Path(__file__).parent.rglob("test_*.py")]
    twice = sorted({stem for stem in modules if modules.count(stem) > 1})
    if twice:
        raise pytest.UsageError(f"test modules share a name in two folders: {twice}")
    gone = sorted(SLOW_MODULES.difference(modules))
    if gone:
        raise pytest.UsageError(f"SLOW_MODULES names test modules that do not exist: {gone}")
    for item in items:
        if item.path.stem in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
