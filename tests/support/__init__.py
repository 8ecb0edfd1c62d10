"""The project's own test plumbing, outside the wheel: nginx, a throwaway PostgreSQL,
free ports, crawls as processes, real generators' sites. Imported by tests/ and
benchmarks/ as ``tests.support.<name>``; what users' tests get is
``increcrawl_scrapy.testing`` (docs/testing.md)."""
