"""Old home of a shared state's heartbeats (``postgres/workers.py``): kept so that
existing imports work."""

from increcrawl_scrapy.state.postgres.workers import beat, leave

__all__ = ["beat", "leave"]
