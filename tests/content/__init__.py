"""Content: a page's kind, main text and fingerprint, also through whole crawls of
real generators' sites."""
