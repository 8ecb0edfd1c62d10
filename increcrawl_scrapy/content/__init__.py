"""What a page's content is: its kind (HTML, text, bytes), its main part, its text.

A site's template (navigation, header, footer, sidebars, previous/next links) changes
every page at once; what is fingerprinted, kept and delivered is the page's own
content. :func:`~increcrawl_scrapy.content.page_text.page_text` is the one door.
"""
