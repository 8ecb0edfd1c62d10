"""Discovery: sitemap and feed parsing, URL normalization and scope, and discovery
through whole crawls."""
