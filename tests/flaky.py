"""A project's own pipeline that fails: used by tests/crawls/test_nothing_lost.py."""

from __future__ import annotations

from typing import Any, ClassVar

from itemadapter import ItemAdapter


class FailOncePipeline:
    """Raises (a storage error, say) the first time it sees each URL in ``FAIL``."""

    FAIL: ClassVar[set[str]] = set()
    failed: ClassVar[list[str]] = []

    def process_item(self, item: Any, spider: Any = None) -> Any:
        url = ItemAdapter(item).get("url")
        if url in self.FAIL:
            self.FAIL.discard(url)
            self.failed.append(url)
            raise RuntimeError(f"storage unavailable for {url}")
        return item
