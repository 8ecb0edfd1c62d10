"""The policy x storage grid of the state's unit tests (as Scrapy's httpcache tests pair
each storage with each policy): a test taking ``store`` runs once for every pairing of
a revisit policy (``INCRECRAWL_POLICY``: ``adaptive``, ``learned``) with a storage
(SQLite, PostgreSQL). A module whose expectations hold for one policy or one storage
only overrides ``policy`` or ``storage`` with a fixture of its own. PostgreSQL's
server is the session's (tests/conftest.py), a new database for each test; where no
PostgreSQL is installed, those pairings skip (under CI they must run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.schedule.policy import LearnedPolicy, RevisitPolicy
from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock

POLICIES = {"adaptive": RevisitPolicy, "learned": LearnedPolicy}
STORAGES = ["sqlite", "postgresql"]


@pytest.fixture(params=STORAGES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the state is: a SQLite file, or a new database on the session's server."""
    if request.param == "postgresql":
        return request.getfixturevalue("postgres_dsn")
    return str(tmp_path / "state.sqlite")


@pytest.fixture(params=sorted(POLICIES))
def policy(request: pytest.FixtureRequest) -> RevisitPolicy:
    return POLICIES[request.param]()


@pytest.fixture
def store(storage: str, policy: RevisitPolicy, clock: Clock) -> StateStore:
    with StateStore(storage, clock=clock, policy=policy) as s:
        yield s
