from __future__ import annotations

from pathlib import Path

import pytest

from increcrawl_scrapy.state import StateStore
from tests.conftest import Clock


@pytest.fixture
def store(tmp_path: Path, clock: Clock) -> StateStore:
    with StateStore(tmp_path / "state.sqlite", clock=clock) as s:
        yield s
