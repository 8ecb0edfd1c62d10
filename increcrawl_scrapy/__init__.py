"""increcrawl-scrapy: incremental web crawling for Scrapy."""

__version__ = "0.1.0"
