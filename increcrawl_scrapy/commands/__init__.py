"""``scrapy increcrawl``: helpers that run outside the crawl (``check``, ``demo``)."""
