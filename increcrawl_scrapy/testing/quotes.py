"""A quotes site in the shape of Scrapy's tutorial (quotes.toscrape.com), served for
real on 127.0.0.1 and mutable between runs.

``/`` and ``/page/N/`` list ten quotes each (``div.quote`` with ``span.text``,
``small.author`` and ``a.tag`` links), a "Next" link (``li.next a``) to the next
page and a navigation bar linking the home page; ``/`` shows the first page, and
``/sitemap.xml`` lists every ``/page/N/``. Each
page has an ETag (a hash of its body) and answers 304 to a matching
``If-None-Match``. Quotes
are edited, added (past a multiple of ten, a new last page appears), inserted or
deleted by index; inserting one moves the quotes after it down by one place,
deleting one moves them up, as such sites do.
"""

from __future__ import annotations

import hashlib
import threading
from collections import Counter
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler

PER_PAGE = 10
_AUTHORS = ("Albert Einstein", "Jane Austen", "Marilyn Monroe", "Steve Martin", "Mark Twain")
_TAGS = ("life", "love", "humor", "books", "truth", "change", "friends")


class QuotesSite:
    def __init__(self, quotes: int = 100) -> None:
        self._lock = threading.Lock()
        self.quotes: list[dict[str, object]] = [self._quote(i) for i in range(quotes)]
        self._made = quotes
        self.deleted_pages: dict[int, int] = {}  # page number -> its 404 or 410
        self.requested: Counter[str] = Counter()  # path -> requests
        self.not_modified: Counter[str] = Counter()  # path -> 304 answers
        self._server: LoopbackServer | None = None

    @staticmethod
    def _quote(i: int) -> dict[str, object]:
        tags = [_TAGS[i % len(_TAGS)], _TAGS[(i * 3 + 1) % len(_TAGS)]]
        return {
            "text": f"\u201cQuote number {i}: the world as we have created it.\u201d",
            "author": _AUTHORS[i % len(_AUTHORS)],
            "tags": sorted(set(tags)),
        }

    # -- lifecycle -----------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the quotes site is not started")
        return self._server.url

    def start(self) -> QuotesSite:
        self._server = LoopbackServer(_handler_for(self))
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> QuotesSite:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what is on the site -------------------------------------------------

    @property
    def pages(self) -> int:
        return max(1, -(-len(self.quotes) // PER_PAGE))

    def page_url(self, n: int) -> str:
        """Page *n* (from 1) as the "Next" links spell it."""
        return f"{self.url}/page/{n}/"

    def edit(self, i: int, text: str) -> None:
        with self._lock:
            self.quotes[i] = {**self.quotes[i], "text": text}

    def add(self, count: int = 1) -> list[int]:
        with self._lock:
            added = list(range(len(self.quotes), len(self.quotes) + count))
            for _ in added:
                self.quotes.append(self._quote(self._made))
                self._made += 1
        return added

    def insert(self, i: int, text: str) -> dict[str, object]:
        """A new quote at index *i*: the ones after it move down one place (the
        last of each page becomes the next page's first)."""
        with self._lock:
            quote = {**self._quote(self._made), "text": text}
            self._made += 1
            self.quotes.insert(i, quote)
        return quote

    def delete(self, i: int) -> dict[str, object]:
        with self._lock:
            return self.quotes.pop(i)

    def delete_page(self, n: int, status: int = 404) -> None:
        """Page *n* answers *status* (404 or 410); the others, and their "Next"
        links, stay as they are."""
        with self._lock:
            self.deleted_pages[n] = status

    def restore_page(self, n: int) -> None:
        with self._lock:
            self.deleted_pages.pop(n, None)

    def reset_counters(self) -> None:
        with self._lock:
            self.requested.clear()
            self.not_modified.clear()

    # -- rendering -----------------------------------------------------------

    def sitemap(self) -> str:
        """Every page (``/page/N/``), for a ``SitemapSpider``."""
        urls = "".join(
            f"<url><loc>{self.page_url(n)}</loc></url>" for n in range(1, self.pages + 1)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>\n'
        )

    def page_html(self, n: int) -> str | None:
        if not 1 <= n <= self.pages:
            return None
        shown = self.quotes[(n - 1) * PER_PAGE : n * PER_PAGE]
        blocks = []
        for quote in shown:
            tags = "".join(
                f'<a class="tag">{escape(str(tag))}</a>'
                for tag in quote["tags"]  # type: ignore[attr-defined]
            )
            blocks.append(
                '<div class="quote">'
                f'<span class="text">{escape(str(quote["text"]))}</span>'
                f'<span>by <small class="author">{escape(str(quote["author"]))}</small></span>'
                f'<div class="tags">Tags: {tags}</div></div>'
            )
        pager = f'<li class="next"><a href="/page/{n + 1}/">Next</a></li>' if n < self.pages else ""
        return (
            "<!doctype html><html><head><title>Quotes</title></head><body>"
            '<div class="header"><a href="/">Quotes to Scrape</a></div>'
            f'{"".join(blocks)}<nav><ul class="pager">{pager}</ul></nav></body></html>'
        )


def _handler_for(site: QuotesSite) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            with site._lock:
                site.requested[path] += 1
                deleted = None
                kind = "text/html; charset=utf-8"
                if path == "/":
                    body = site.page_html(1)
                elif path == "/sitemap.xml":
                    body, kind = site.sitemap(), "application/xml"
                elif path.startswith("/page/"):
                    try:
                        number = int(path.split("/")[2])
                    except (IndexError, ValueError):
                        number = 0
                    deleted = site.deleted_pages.get(number)
                    body = None if deleted else site.page_html(number)
                else:
                    body = None
            if deleted:
                self.send_body(deleted, b"gone", "text/plain")
                return
            if body is None:
                self.send_body(404, b"not found", "text/plain")
                return
            data = body.encode()
            etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
            if self.headers.get("If-None-Match") == etag:
                with site._lock:
                    site.not_modified[path] += 1
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_body(200, data, kind, {"ETag": etag})

    return Handler
