"""The add-on's pages: a project's own spider with ``ADDONS = {"increcrawl_scrapy.Addon":
300}``. A response's items grouped by page (``middleware.py``, ``page.py``), in flight
to the pipeline and their delivery (``in_flight.py``), their
previous versions and kept requests (``memory.py``), items that moved between pages
(``moved.py``), pages gone (``gone.py``) or no longer reached (``unreached.py``),
requests for pages not due skipped (``skip_not_due.py``), forms posted to a page's
own URL, which are not the page (``postbacks.py``), and Scrapy's HTTP cache, whose
answers are no fetch (``http_cache.py``)."""
