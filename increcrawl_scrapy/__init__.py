"""increcrawl-scrapy: incremental web crawling for Scrapy."""

from increcrawl_scrapy.addon import Addon

__all__ = ["Addon"]
__version__ = "0.1.0"
