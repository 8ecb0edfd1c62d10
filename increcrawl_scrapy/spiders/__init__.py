"""Spiders of the increcrawl project (``scrapy crawl incremental``)."""
