"""A second loopback host (127.0.0.2) that counts every request it receives: a
crawl that must never leave its seed's host must leave it at zero."""

from __future__ import annotations

import threading

from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler


class Canary:
    """A server on 127.0.0.2 (or *host*) that counts every request it receives."""

    def __init__(self, body: bytes = b"<p>another site</p>", host: str = "127.0.0.2") -> None:
        self.hits: list[str] = []
        lock = threading.Lock()
        hits = self.hits

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                with lock:
                    hits.append(self.path)
                self.send_body(200, body, "text/html")

        self.server = LoopbackServer(Handler, host=host)

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self) -> Canary:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
