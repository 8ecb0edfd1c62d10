"""scrapy-deltafetch 2.1 as Scrapy 2.13+ accepts it: its middleware only has a
synchronous ``process_spider_output``, which recent Scrapy refuses; this adds the
asynchronous one, doing the same (for the embedding benchmark only)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from scrapy_deltafetch import DeltaFetch


class AsyncDeltaFetch(DeltaFetch):
    async def process_spider_output_async(
        self, response: Any, result: AsyncIterator[Any], spider: Any = None
    ) -> AsyncIterator[Any]:
        outputs = [output async for output in result]
        for output in self.process_spider_output(response, outputs, spider):
            yield output
