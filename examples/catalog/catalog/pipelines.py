"""The project's own storage pipeline, after increcrawl's. ``CATALOG_FAIL_URLS``
(a comma-separated list) makes it fail on those pages: a storage outage, to show
that a change the storage did not take is reported again by the next run."""

from __future__ import annotations

from itemadapter import ItemAdapter


class StoragePipeline:
    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.getlist("CATALOG_FAIL_URLS"))

    def __init__(self, failing):
        self.failing = set(failing)

    def process_item(self, item, spider=None):
        if ItemAdapter(item).get("url") in self.failing:
            raise OSError("storage unavailable")
        return item
