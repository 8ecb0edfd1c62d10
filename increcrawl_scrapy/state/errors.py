"""What the state raises, whichever backend holds it."""

from __future__ import annotations


class StateError(RuntimeError):
    """The state database cannot be used; the message says why and what to do."""


class RunOver(ValueError):
    """A discovery step of a run whose discovery tables are gone (a later run
    started on the store, or its connection was opened again)."""


class StateLockedError(StateError):
    """Another process holds the database longer than the lock timeout."""
