"""One crawl per database: a lock file beside it, on every platform (filelock)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from filelock import FileLock, Timeout

from increcrawl_scrapy.state.errors import StateLockedError
from increcrawl_scrapy.state.sqlite.database import resolved


class CrawlLock:
    """Held for a crawl's whole life. A second crawl on the same file (by any path:
    symlinks are resolved) stops at once with the holder's process id."""

    def __init__(self, path: str) -> None:
        self.path = path
        base = resolved(path)
        self._holder = Path(base + ".lock.pid")  # who holds it, for the message
        self._lock = FileLock(base + ".lock", timeout=0)

    def acquire(self) -> CrawlLock:
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            holder = "unknown"
            with contextlib.suppress(OSError):
                holder = self._holder.read_text().strip() or holder
            raise StateLockedError(
                f"state database {self.path} is in use by another crawl (pid {holder}); "
                "wait for it to finish or point INCRECRAWL_DB at another file"
            ) from None
        with contextlib.suppress(OSError):
            self._holder.write_text(str(os.getpid()))
        return self

    def release(self) -> None:
        if self._lock.is_locked:
            with contextlib.suppress(OSError):
                self._holder.unlink()
            self._lock.release(force=True)
