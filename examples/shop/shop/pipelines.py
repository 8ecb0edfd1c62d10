class CurrencyPipeline:
    """The project's own pipeline: it must keep running after increcrawl's."""

    def process_item(self, item, spider=None):
        item["currency"] = "EUR"
        return item
