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

Its other shapes (``quotes_shapes.py``): ``/api/quotes?page=N``, ``/js/page/N/``,
``/grid`` (paged by postbacks), ``/login`` and ``/img/SLUG.png``. With
*login_required*, every page but ``/login`` redirects there without the session
cookie of the last login (a new login ends the session before it).
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections import Counter
from urllib.parse import parse_qs, urlsplit
from xml.sax.saxutils import escape

from increcrawl_scrapy.testing import quotes_shapes as shapes
from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler

PER_PAGE = 10
_AUTHORS = ("Albert Einstein", "Jane Austen", "Marilyn Monroe", "Steve Martin", "Mark Twain")
_TAGS = ("life", "love", "humor", "books", "truth", "change", "friends")


class QuotesSite:
    def __init__(self, quotes: int = 100, login_required: bool = False) -> None:
        self._lock = threading.Lock()
        self.login_required = login_required
        self.session = ""  # the cookie's value since the last login
        self.csrf_tokens: set[str] = set()
        self.logins = 0
        self.quotes: list[dict[str, object]] = [self._quote(i) for i in range(quotes)]
        self._made = quotes
        self.deleted_pages: dict[int, int] = {}  # page number -> its 404 or 410
        self.requested: Counter[str] = Counter()  # path (and ?query) -> requests
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

    def shown(self, n: int) -> tuple[list[dict[str, object]], bool] | None:
        """Page *n*'s quotes and whether a next page follows."""
        if not 1 <= n <= self.pages:
            return None
        return self.quotes[(n - 1) * PER_PAGE : n * PER_PAGE], n < self.pages

    def other_shape(self, path: str, query: str) -> tuple[str, str] | None:
        """The body and type of one of the other shapes' pages, or None."""
        if path == "/api/quotes":
            n = int((parse_qs(query).get("page") or ["1"])[0])
            page = self.shown(n)
            return None if page is None else (shapes.api_json(page[0], n, page[1]), "json")
        if path == "/js/" or path.startswith("/js/page/"):
            n = 1 if path == "/js/" else _number(path, 3)
            page = self.shown(n)
            return None if page is None else (shapes.js_html(page[0], n, page[1]), "html")
        if path == "/grid":
            page = self.shown(1)
            return None if page is None else (self.grid(1), "html")
        if path == "/login":
            token = secrets.token_hex(8)
            self.csrf_tokens.add(token)
            return shapes.login_html(token), "html"
        return None

    def grid(self, n: int) -> str:
        page = self.shown(n) or ([], False)
        return shapes.grid_html(page[0], n, page[1], f"dDw{len(self.quotes)}Pg==")


def _number(path: str, at: int) -> int:
    try:
        return int(path.split("/")[at])
    except (IndexError, ValueError):
        return 0


_TYPES = {"html": "text/html; charset=utf-8", "json": "application/json"}


def _handler_for(site: QuotesSite) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            path, query = urlsplit(self.path).path, urlsplit(self.path).query
            with site._lock:
                site.requested[path + (f"?{query}" if query else "")] += 1
                if self._refused(path):
                    return
                deleted = None
                kind = "text/html; charset=utf-8"
                other = site.other_shape(path, query)
                if path.startswith("/img/") and path.endswith(".png"):
                    authors = [shapes.slug(a) for a in _AUTHORS]
                    name = path[5:-4]
                    if name in authors:
                        self.send_body(200, shapes.png(authors.index(name)), "image/png")
                        return
                    body = None
                elif other is not None:
                    body, kind = other[0], _TYPES[other[1]]
                elif path == "/":
                    body = site.page_html(1)
                elif path == "/sitemap.xml":
                    body, kind = site.sitemap(), "application/xml"
                elif path.startswith("/page/"):
                    number = _number(path, 2)
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
            self._send(path, body.encode(), kind)

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
            with site._lock:
                site.requested[f"POST {path}"] += 1
                if path == "/login":
                    if form.get("csrf_token") not in site.csrf_tokens or not form.get("username"):
                        self.send_body(403, b"bad login", "text/plain")
                        return
                    site.csrf_tokens.discard(form["csrf_token"])
                    site.session, site.logins = secrets.token_hex(8), site.logins + 1
                    self.send_body(
                        302, b"", "text/plain",
                        {"Location": "/", "Set-Cookie": f"session={site.session}; Path=/"},
                    )  # fmt: skip
                    return
                if self._refused(path):
                    return
                if path == "/grid" and form.get("__EVENTTARGET") == "grid":
                    n = _number(form.get("__EVENTARGUMENT", "Page$1").replace("$", "/"), 1)
                    body = site.grid(n) if site.shown(n) else None
                    if body is not None:
                        self.send_body(200, body.encode(), _TYPES["html"])
                        return
            self.send_body(400, b"bad postback", "text/plain")

        def _refused(self, path: str) -> bool:
            """Without the session (*login_required*): a redirect to the login form."""
            if not site.login_required or path == "/login":
                return False
            if f"session={site.session}" in (self.headers.get("Cookie") or "") and site.session:
                return False
            self.send_body(302, b"", "text/plain", {"Location": "/login"})
            return True

        def _send(self, path: str, data: bytes, kind: str) -> None:
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
