"""Whole crawls through Scrapy: the crawl's state and delivery, runs, crashes, and
PostgreSQL under a crawl."""
