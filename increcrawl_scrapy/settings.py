"""Project settings for ``scrapy crawl incremental`` and Scrapyd jobs.

Never put GEONODE_API_KEY here: Scrapyd eggs ship this file. Set it in the
environment of the crawl (or of the Scrapyd process) instead. Every
``INCRECRAWL_*`` / ``GEONODE_*`` default lives in ``increcrawl_scrapy.config``.
"""

BOT_NAME = "increcrawl_scrapy"
SPIDER_MODULES = ["increcrawl_scrapy.spiders"]
NEWSPIDER_MODULE = "increcrawl_scrapy.spiders"
# `crawl` checks every increcrawl setting first (one line for a bad value);
# `increcrawl check|demo` is here too.
COMMANDS_MODULE = "increcrawl_scrapy.commands"

# The Geonode middleware and the state pipeline, as an embedding project gets them.
ADDONS = {"increcrawl_scrapy.Addon": 300}

ROBOTSTXT_OBEY = True
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
FEED_EXPORT_ENCODING = "utf-8"

# Production logs: INFO (Scrapy's DEBUG logs every request and response); items are
# named by their label and URL, never dumped with their markdown, at any level.
LOG_LEVEL = "INFO"
LOG_FORMATTER = "increcrawl_scrapy.log_formatter.ItemSummaryLogFormatter"

# A page gives one item, yet Scrapy starts CONCURRENT_ITEMS output workers for each
# response, whatever it yields (scrapy/scrapy#5182): at its default of 100 that was
# over a third of a first run's CPU per page (benchmarks/content_throughput.py).
CONCURRENT_ITEMS = 8
