"""A sample origin site served for real on 127.0.0.1, mutable between crawl runs.

Page ``i`` is one of four kinds, by ``i % 4``:

- ``etag``: a strong ETag, 304 to a matching ``If-None-Match``;
- ``last_modified``: a Last-Modified date, 304 to ``If-Modified-Since`` not older;
- ``plain``: no validators;
- ``volatile``: no validators, and a timestamp, a CSRF token and a "Related posts"
  block that differ on every request (the content itself stays the same).

Page bodies are generated from ``(i, version)`` on request, so a site of a
million pages costs no memory; only mutations are stored.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import random
import secrets
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler

KINDS = ("etag", "last_modified", "plain", "volatile")
LASTMOD_MODES = ("honest", "deploy", "frozen", "mixed", "none")
SITEMAP_MAX_URLS = 50_000  # the sitemaps protocol's per-file limit
_BASE_TIME = 1_700_000_000.0  # when every page was first written
_WORDS = (
    "apple",
    "pear",
    "plum",
    "cherry",
    "river",
    "stone",
    "cloud",
    "garden",
    "lantern",
    "harbor",
    "meadow",
    "candle",
    "violet",
    "copper",
    "silver",
    "amber",
    "forest",
    "window",
    "bridge",
    "summer",
    "winter",
    "island",
    "valley",
)


class SampleSite:
    """The sample origin. Use as a context manager, or call start() and stop()."""

    def __init__(
        self,
        pages: int = 20,
        *,
        children: int = 2,
        lastmod_mode: str = "honest",
        port: int = 0,
        template: bool = False,
    ) -> None:
        if lastmod_mode not in LASTMOD_MODES:
            raise ValueError(f"lastmod_mode must be one of {LASTMOD_MODES}")
        self._lock = threading.Lock()
        self.pages = pages
        self.children = children
        self.lastmod_mode = lastmod_mode
        self._versions: dict[int, int] = {}
        self._texts: dict[int, str] = {}
        self._modified: dict[int, float] = {}
        self._lastmod_bumps: dict[int, float] = {}
        self._deleted: dict[int, int] = {}
        self._dead_links: set[int] = set()  # deleted pages the home page still links to
        self._failing: dict[int, int] = {}
        self._redirects: dict[int, tuple[int, str]] = {}
        self._failing_paths: dict[str, int] = {}
        self._raw: dict[str, tuple[bytes, str]] = {}
        self._unlisted: set[int] = set()
        self._noise: dict[int, str] = {}
        self._deployed_at = _BASE_TIME
        self._generation = 0
        self._gz_cache: dict[tuple[int, int], bytes] = {}
        self.counters: Counter[str] = Counter()
        self.fetched: Counter[str] = Counter()  # page path -> requests
        self.conditional: Counter[str] = Counter()  # page path -> conditional requests
        self.requested: Counter[str] = Counter()  # any path -> requests
        self._port = port
        #: Pages in a site's template (header, navigation, <main>, footer), as real
        #: sites have one (the demo's); bare by default, as the tests know them.
        self.template = template
        self._server: LoopbackServer | None = None  # bound on start()

    # -- lifecycle -----------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the sample site is not started")
        return self._server.url

    @property
    def sitemap_url(self) -> str:
        return f"{self.url}/sitemap.xml"

    @property
    def robots_url(self) -> str:
        return f"{self.url}/robots.txt"

    def start(self) -> SampleSite:
        self._server = LoopbackServer(_handler_for(self), self._port)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> SampleSite:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what is on the site -------------------------------------------------

    @staticmethod
    def kind(i: int) -> str:
        return KINDS[i % len(KINDS)]

    def page_url(self, i: int) -> str:
        return f"{self.url}/page/{i}"

    def page_urls(self, *, include_deleted: bool = False) -> list[str]:
        return [
            self.page_url(i) for i in range(self.pages) if include_deleted or i not in self._deleted
        ]

    def listed(self) -> list[int]:
        """Pages the sitemap lists now."""
        return [i for i in range(self.pages) if i not in self._unlisted and i not in self._deleted]

    def text(self, i: int) -> str:
        if i in self._texts:
            return self._texts[i]
        version = self._versions.get(i, 0)
        rng = random.Random(i * 7919 + version)  # noqa: S311 - sample text, not security
        words = " ".join(rng.choice(_WORDS) for _ in range(24))
        return f"Page {i} revision {version}. {words}."

    def modified_at(self, i: int) -> float:
        return self._modified.get(i, _BASE_TIME + i)

    def etag(self, i: int) -> str:
        digest = hashlib.sha1(self.text(i).encode(), usedforsecurity=False).hexdigest()[:12]
        return f'"{i}-{digest}"'

    def lastmod(self, i: int) -> str | None:
        """The sitemap ``lastmod`` of page *i*; a third of the pages have none (every
        page in the ``none`` mode, as WordPress before 6.5 writes its sitemaps)."""
        if i % 3 == 0 or self.lastmod_mode == "none":
            return None
        if self.lastmod_mode == "frozen":
            stamp = _BASE_TIME
        elif self.lastmod_mode == "deploy":
            stamp = self._deployed_at
        elif self.lastmod_mode == "mixed":  # edits move a page's date, deploys stamp all
            stamp = max(self.modified_at(i), self._deployed_at)
        else:
            stamp = max(self.modified_at(i), self._lastmod_bumps.get(i, 0.0))
        return datetime.fromtimestamp(stamp, timezone.utc).isoformat(timespec="seconds")

    # -- mutations -----------------------------------------------------------

    def _mutated(self) -> None:
        self._generation += 1
        self._gz_cache.clear()

    def edit(self, i: int, text: str | None = None, at: float | None = None) -> None:
        """Change page *i*'s content (a new revision, or the given text), now or at
        Unix time *at*."""
        with self._lock:
            self._versions[i] = self._versions.get(i, 0) + 1
            if text is not None:
                self._texts[i] = text
            else:
                self._texts.pop(i, None)
            self._modified[i] = max(time.time() if at is None else at, self.modified_at(i) + 1)
            self._mutated()

    def edit_quietly(self, i: int) -> None:
        """Change page *i*'s content without its sitemap date moving (stale dates)."""
        with self._lock:
            self._versions[i] = self._versions.get(i, 0) + 1
            self._texts.pop(i, None)

    def add(self, count: int = 1) -> list[int]:
        with self._lock:
            added = list(range(self.pages, self.pages + count))
            now = time.time()
            for i in added:
                self._modified[i] = now
            self.pages += count
            self._mutated()
        return added

    def delete(self, i: int, status: int = 404, *, linked: bool = False) -> None:
        """Page *i* answers *status* from now on; *linked*: the home page still links
        to it (a dead link), else it is listed nowhere."""
        if status not in (404, 410):
            raise ValueError("a deleted page answers 404 or 410")
        with self._lock:
            self._deleted[i] = status
            if linked:
                self._dead_links.add(i)
            self._mutated()

    def restore(self, i: int) -> None:
        """A deleted page *i* answers again."""
        with self._lock:
            self._deleted.pop(i, None)
            self._dead_links.discard(i)
            self._mutated()

    def fail(self, i: int, status: int | None = 500) -> None:
        """Make page *i* answer *status* (None: answer normally again)."""
        with self._lock:
            if status is None:
                self._failing.pop(i, None)
            else:
                self._failing[i] = status

    def redirect(self, i: int, location: str | None, status: int = 302) -> None:
        """Make page *i* answer *status* with ``Location: location`` (None: stop)."""
        with self._lock:
            if location is None:
                self._redirects.pop(i, None)
            else:
                self._redirects[i] = (status, location)

    def serve(self, path: str, body: bytes, content_type: str = "application/xml") -> str:
        """Serve *body* as is at *path* (a hostile sitemap, say); returns its URL."""
        with self._lock:
            self._raw[path] = (body, content_type)
        return f"{self.url}{path}"

    def fail_path(self, path: str, status: int | None = 500) -> None:
        """Make any path (``/sitemap-2.xml.gz``, ``/robots.txt``) answer *status*."""
        with self._lock:
            if status is None:
                self._failing_paths.pop(path, None)
            else:
                self._failing_paths[path] = status

    def hide_sitemaps(self) -> None:
        """A site with no sitemap to find: robots.txt without ``Sitemap:`` lines, and
        the sitemap at none of the well-known paths."""
        self.serve("/robots.txt", b"User-agent: *\nDisallow:\n", "text/plain")
        self.fail_path("/sitemap.xml", 404)

    def add_noise(self, i: int, template: str) -> None:
        """Page *i* shows *template* with ``{n}`` replaced by its request count: volatile
        text of a kind the default rules do not know (the content stays the same)."""
        with self._lock:
            self._noise[i] = template

    def drop_from_sitemap(self, i: int) -> None:
        """Page *i* leaves the sitemap but still answers."""
        with self._lock:
            self._unlisted.add(i)
            self._mutated()

    def restore_to_sitemap(self, i: int) -> None:
        with self._lock:
            self._unlisted.discard(i)
            self._mutated()

    def bump_lastmod(self, i: int, at: float | None = None) -> None:
        """A new sitemap lastmod for page *i* without any change to its content, now or
        at Unix time *at*."""
        with self._lock:
            stamp = time.time() if at is None else at
            self._lastmod_bumps[i] = max(stamp, self.modified_at(i) + 1)
            self._mutated()

    def deploy(self) -> None:
        """In ``deploy`` mode every lastmod becomes the time of this deploy."""
        with self._lock:
            self._deployed_at = max(time.time(), self._deployed_at + 1)
            self._mutated()

    def reset_counters(self) -> None:
        with self._lock:
            self.counters.clear()
            self.requested.clear()
            self.fetched.clear()
            self.conditional.clear()

    # -- rendering -----------------------------------------------------------

    def robots_txt(self) -> bytes:
        return f"User-agent: *\nAllow: /\n\nSitemap: {self.sitemap_url}\n".encode()

    def _chunks(self) -> list[list[int]]:
        listed = self.listed()
        size = min(SITEMAP_MAX_URLS, max(1, math.ceil(len(listed) / max(1, self.children))))
        return [listed[k : k + size] for k in range(0, len(listed), size)] or [[]]

    @staticmethod
    def child_name(number: int) -> str:
        # Odd children plain, even children gzipped: both kinds in every index.
        return f"sitemap-{number}.xml" + (".gz" if number % 2 == 0 else "")

    def sitemap_index(self) -> bytes:
        entries = "".join(
            f"<sitemap><loc>{self.url}/{self.child_name(n)}</loc></sitemap>"
            for n in range(1, len(self._chunks()) + 1)
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"{entries}</sitemapindex>\n"
        ).encode()

    def child_sitemap(self, number: int) -> bytes | None:
        chunks = self._chunks()
        if not 1 <= number <= len(chunks):
            return None
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        ]
        for i in chunks[number - 1]:
            lastmod = self.lastmod(i)
            stamp = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
            parts.append(f"<url><loc>{escape(self.page_url(i))}</loc>{stamp}</url>")
            variant = self._variant(i)
            if variant:
                parts.append(f"<url><loc>{escape(variant)}</loc>{stamp}</url>")
        parts.append("</urlset>\n")
        return "".join(parts).encode()

    def _variant(self, i: int) -> str | None:
        # Spellings that normalization must fold into the page's one row.
        if i == 0:
            return f"{self.page_url(0)}/?utm_source=sitemap&utm_medium=xml#top"
        if i == 1:
            return self.page_url(1).replace("http://", "HTTP://", 1) + "?fbclid=abc"
        return None

    def gz_child(self, number: int) -> bytes | None:
        key = (number, self._generation)
        if key not in self._gz_cache:
            body = self.child_sitemap(number)
            if body is None:
                return None
            self._gz_cache[key] = gzip.compress(body, compresslevel=5, mtime=0)
        return self._gz_cache[key]

    def page_html(self, i: int) -> str:
        # Links only to older pages, so adding a page changes no other page.
        links = [f'<a href="/page/{i - 1}">Page {i - 1}</a>'] if i else []
        links.append(f'<a href="/page/{i // 2}/?utm_source=nav">Back to {i // 2}</a>')
        volatile = ""
        if self.kind(i) == "volatile":
            rendered = datetime.now(timezone.utc).isoformat()
            picks = random.sample(range(self.pages), k=min(3, self.pages))
            related = "".join(f'<li><a href="/page/{j}">Page {j}</a></li>' for j in picks)
            volatile = (
                f"<p>Rendered at {rendered}</p>"
                f"<form><p>Form token: csrf_token={secrets.token_hex(16)}</p></form>"
                f"<h2>Related posts</h2><ul>{related}</ul>"
            )
        if i in self._noise:
            volatile += f"<p>{escape(self._noise[i].format(n=self.fetched[f'/page/{i}']))}</p>"
        content = (
            f"<h1>Page {i}</h1><p>{escape(self.text(i))}</p>{volatile}"
            f"<h2>More</h2><p>{' '.join(links)}</p>"
        )
        return (
            "<!doctype html><html><head>"
            f"<title>Page {i}</title>"
            f'<meta name="csrf-token" content="{secrets.token_hex(8)}">'
            f"</head><body>{self._around(content)}</body></html>"
        )

    def _around(self, content: str) -> str:
        """*content* in the site's template, when it has one."""
        if not self.template:
            return content
        nav = "".join(f'<li><a href="/page/{j}">Page {j}</a></li>' for j in self.listed()[:5])
        return (
            f'<header><a href="/">Sample site</a><nav><ul>{nav}</ul></nav></header>'
            f"<main>{content}</main><footer><p>Sample site, {len(self.listed())} pages</p>"
            "</footer>"
        )

    def home_html(self) -> str:
        linked = sorted({*self.listed()[:50], *self._dead_links})
        links = "".join(f'<li><a href="/page/{i}">Page {i}</a></li>' for i in linked)
        return f"<!doctype html><html><body><h1>Sample site</h1><ul>{links}</ul></body></html>"

    def answer_page(self, i: int, headers: Any) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for a request of page *i*."""
        if i >= self.pages or i < 0:
            return 404, {}, b"not found"
        if i in self._deleted:
            return self._deleted[i], {}, b"gone"
        if i in self._failing:
            return self._failing[i], {}, b"failing on purpose"
        if i in self._redirects:
            status, location = self._redirects[i]
            return status, {"Location": location}, b"moved"
        kind = self.kind(i)
        validators: dict[str, str] = {}
        not_modified = False
        if kind == "etag":
            validators["ETag"] = self.etag(i)
            wanted = headers.get("If-None-Match")
            if wanted:
                tags = {tag.strip().removeprefix("W/") for tag in wanted.split(",")}
                not_modified = "*" in tags or self.etag(i) in tags
        elif kind == "last_modified":
            modified = int(self.modified_at(i))
            validators["Last-Modified"] = format_datetime(
                datetime.fromtimestamp(modified, timezone.utc), usegmt=True
            )
            since = headers.get("If-Modified-Since")
            if since:
                try:
                    not_modified = parsedate_to_datetime(since).timestamp() >= modified
                except (TypeError, ValueError):
                    not_modified = False
        if not_modified:
            return 304, validators, b""
        return 200, validators, self.page_html(i).encode()


def _handler_for(site: SampleSite) -> type[QuietHandler]:
    class Handler(QuietHandler):
        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            with site._lock:
                site.counters["requests"] += 1
                site.requested[path] += 1
                failing = site._failing_paths.get(path)
                raw = site._raw.get(path)
            if raw is not None:
                self.send_body(200, raw[0], raw[1])
            elif failing is not None:
                self.send_body(failing, b"failing on purpose", "text/plain")
            elif path == "/robots.txt":
                self.send_body(200, site.robots_txt(), "text/plain")
            elif path == "/sitemap.xml":
                self.send_body(200, site.sitemap_index(), "application/xml")
            elif path.startswith("/sitemap-"):
                self._sitemap(path)
            elif path == "/":
                self.send_body(200, site.home_html().encode(), "text/html; charset=utf-8")
            elif path.startswith("/page/"):
                self._page(path)
            else:
                self.send_body(404, b"not found", "text/plain")

        def _sitemap(self, path: str) -> None:
            name = path.lstrip("/")
            try:
                number = int(name.split("-")[1].split(".")[0])
            except (IndexError, ValueError):
                number = 0
            if name != site.child_name(number):
                self.send_body(404, b"not found", "text/plain")
                return
            if name.endswith(".gz"):
                body = site.gz_child(number)
                kind = "application/gzip"
            else:
                body = site.child_sitemap(number)
                kind = "application/xml"
            if body is None:
                self.send_body(404, b"not found", "text/plain")
                return
            etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
            with site._lock:
                site.counters["sitemap_requests"] += 1
                if self.headers.get("If-None-Match") == etag:
                    site.counters["sitemap_304"] += 1
                    self.send_response(304)
                    self.send_header("ETag", etag)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
            self.send_body(200, body, kind, {"ETag": etag})

        def _page(self, path: str) -> None:
            try:
                i = int(path.split("/")[2])
            except (IndexError, ValueError):
                self.send_body(404, b"not found", "text/plain")
                return
            conditional = bool(
                self.headers.get("If-None-Match") or self.headers.get("If-Modified-Since")
            )
            with site._lock:
                status, headers, body = site.answer_page(i, self.headers)
                site.counters["pages"] += 1
                site.fetched[f"/page/{i}"] += 1
                if conditional:
                    site.counters["conditional"] += 1
                    site.conditional[f"/page/{i}"] += 1
                site.counters[f"status/{status}"] += 1
            if status == 304:
                self.send_response(304)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            kind = "text/html; charset=utf-8" if status == 200 else "text/plain"
            self.send_body(status, body, kind, headers)

    return Handler
