class ShopHeadersMiddleware:
    """The project's own downloader middleware: it must keep running."""

    def process_request(self, request, spider=None):
        request.headers.setdefault("X-Shop", "1")
