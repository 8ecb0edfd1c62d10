"""Old home of the SQLite backend and the state's errors (``sqlite/database.py``,
``errors.py``, ``backend.py``): kept so that existing imports work."""

from increcrawl_scrapy.state.backend import serialized
from increcrawl_scrapy.state.errors import RunOver, StateError, StateLockedError
from increcrawl_scrapy.state.sqlite.database import Database, resolved

__all__ = ["Database", "RunOver", "StateError", "StateLockedError", "resolved", "serialized"]
