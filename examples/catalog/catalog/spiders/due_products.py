"""The incremental spider with your own callback: discovery from the sitemap, the
change queue and recording are increcrawl's; the product pages that are due come to
``parse_product``, which yields this project's items."""

from __future__ import annotations

from increcrawl_scrapy.spiders.incremental import IncrementalSpider


class DueProductsSpider(IncrementalSpider):
    name = "due_products"
    page_rules = [(r"/page/\d+$", "parse_product")]
    increcrawl_formats = ("html",)  # through Geonode too: our callback uses selectors

    def parse_product(self, response):
        yield {
            "url": response.url,
            "title": response.css("h1::text").get(),
            "text": " ".join(response.css("body > p::text").getall()),
        }
