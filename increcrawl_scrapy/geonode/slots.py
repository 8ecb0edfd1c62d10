"""How many API calls may be in flight: a semaphore whose size can change while
calls wait (the plan's limit read at start, lowered by the API's 429s)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Slots:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self._in_use = 0
        self._changed = asyncio.Condition()

    @asynccontextmanager
    async def one(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: self._in_use < self.limit)
            self._in_use += 1
        try:
            yield
        finally:
            async with self._changed:
                self._in_use -= 1
                self._changed.notify_all()

    async def resize(self, limit: int) -> None:
        async with self._changed:
            self.limit = max(1, limit)
            self._changed.notify_all()
