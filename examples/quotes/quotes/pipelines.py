"""The project's own storage pipeline, after increcrawl's. ``QUOTES_FAIL_TEXT`` (a
piece of a quote's text) makes it fail on that quote: a storage outage, to show that
a change the storage did not take is delivered again by the next run."""

from __future__ import annotations


class StoragePipeline:
    @classmethod
    def from_crawler(cls, crawler):
        return cls(crawler.settings.get("QUOTES_FAIL_TEXT"))

    def __init__(self, failing):
        self.failing = failing

    def process_item(self, item, spider=None):
        if self.failing and self.failing in str(item.get("text", "")):
            raise OSError("storage unavailable")
        return item
