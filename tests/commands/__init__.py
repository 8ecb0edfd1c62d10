"""The operator's commands (scrapy increcrawl ...) run as an operator runs them."""
