"""increcrawl-scrapy: incremental web crawling for Scrapy."""

from increcrawl_scrapy.addon import Addon
from increcrawl_scrapy.compat import keep_old_import_paths

keep_old_import_paths()

__all__ = ["Addon"]
__version__ = "0.2.0"
