"""Which URLs a crawl may request, decided on the URL exactly as it will be requested.

A hostile sitemap can spell a URL so that one parser reads one host and another
parser another (``http://evil\\@seed/``: a regex sees userinfo and the seed, Scrapy
reads ``\\`` as ``/`` and connects to ``evil``). So every URL is first turned into
the string Scrapy will request (``Request.url``, w3lib's WHATWG-style
``safe_url_string``), and scope is judged on that string alone. URLs whose
authority could still be read two ways (userinfo, percent-encoded or otherwise
unusual hosts) are refused outright: no real sitemap needs them.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urljoin, urlsplit

from w3lib.url import safe_url_string

MAX_URL_LENGTH = 2048

# URLs that safe_url_string returns unchanged, in w3lib 2.5 and 2.6 alike (tested):
# lower-case http(s) scheme and host, a path of characters it never rewrites and no
# dot segment, no query. Most sitemap URLs are like this. w3lib 2.6 adds "/" to an
# empty path, resolves dot segments and rewrites a host ending in a number as IPv4
# ("0" is 0.0.0.0; "a.0" is an error): a host here ends in a label with a letter first.
_AS_REQUESTED = re.compile(
    r"https?://(?:[a-z0-9_-]*\.)*[a-z][a-z0-9_-]*(?::[0-9]{1,5})?"
    r"(?:/(?!\.\.?(?:/|$))[A-Za-z0-9\-._~!$&'()*+,;=:@]*)+"
)
# A host both Scrapy (w3lib, urllib) and Twisted's connector read the same way:
# DNS labels, a dotted IPv4 address, or a bracketed IPv6 literal. A trailing dot,
# percent escapes or anything else is refused.
_PLAIN_HOST = re.compile(
    r"(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
    r"|\[[0-9a-f:.]+\]"
)
# A host whose last label is a number is an IPv4 address to a WHATWG parser, in
# whatever spelling (``2130706433``, ``0x7f.1``, ``0177.0.0.1``): only the plain
# dotted-quad spelling is accepted.
_NUMERIC_LABEL = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)")
_DOTTED_QUAD = re.compile(
    r"(?:(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])\.){3}"
    r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
)


class UrlRefused(ValueError):
    """A URL that will not be requested; ``reason`` is a stats key part."""

    def __init__(self, reason: str, url: str) -> None:
        super().__init__(f"{reason}: {url[:200]!r}")
        self.reason = reason


def requested_url(url: str) -> str:
    """*url* exactly as Scrapy will request it (what ``Request(url).url`` is)."""
    if _AS_REQUESTED.fullmatch(url):
        return url
    return safe_url_string(url, "utf-8")


def request_target(url: str) -> tuple[str, str]:
    """``(requested URL, host)`` for an absolute http(s) URL with an unambiguous
    authority; raises UrlRefused (reasons ``too_long``, ``bad_scheme``,
    ``userinfo``, ``bad_host``, ``ambiguous``) otherwise."""
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused("too_long", url)
    as_written = _AS_REQUESTED.fullmatch(url) is not None  # then both readings agree
    if as_written:
        # The common case, read without urlsplit (a sitemap has millions): the
        # pattern leaves no userinfo and a port of digits only.
        requested = url
        host, _, port_digits = url[url.index("://") + 3 :].partition("/")[0].partition(":")
        if port_digits and int(port_digits) > 65535:
            raise UrlRefused("bad_host", url)
    else:
        try:
            requested = safe_url_string(url, "utf-8")
            parts = urlsplit(requested)
            port = parts.port  # a port that is not a number raises here
        except ValueError:
            raise UrlRefused("bad_host", url) from None
        if parts.scheme not in ("http", "https"):
            raise UrlRefused("bad_scheme", url)
        if "@" in parts.netloc:
            raise UrlRefused("userinfo", url)
        host = parts.netloc.lower()
        if port is not None or host.endswith(":"):
            host = host.rpartition(":")[0]
    if not _PLAIN_HOST.fullmatch(host) or len(requested) > MAX_URL_LENGTH:
        raise UrlRefused("bad_host", url)
    if _NUMERIC_LABEL.fullmatch(host.rpartition(".")[2]) and not _DOTTED_QUAD.fullmatch(host):
        raise UrlRefused("bad_host", url)
    if not as_written and _host_as_written(url) != host.strip("[]"):
        # Read one way by urllib and another by Scrapy (``http://a\\@b/``): refused,
        # whichever host each reading names.
        raise UrlRefused("ambiguous", url)
    return requested, host


def _host_as_written(url: str) -> str | None:
    """The host urllib reads in *url* as written, in its IDNA (ASCII) form; None for
    one IDNA's versions spell two ways: IDNA 2003 (Python's codec, w3lib up to 2.5)
    maps "ß" and "ς" to other letters, browsers and w3lib 2.6 keep them."""
    try:
        host = urlsplit(url.strip()).hostname
        if not host or "ß" in host or "ς" in host:
            return None
        return host.encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError):
        return None


def is_ip_literal(host: str) -> bool:
    return host.startswith("[") or _DOTTED_QUAD.fullmatch(host) is not None


def site_of(host: str) -> str:
    """The site a host belongs to for redirects: ``www.`` is the same site."""
    return host[4:] if host.startswith("www.") else host


_DEFAULT_PORTS = {"http": 80, "https": 443}


def port_of(requested: str) -> int | None:
    """The port a requested URL (``requested_url``) names, None for its scheme's
    default."""
    scheme, _, rest = requested.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    _host, colon, digits = authority.rpartition(":")
    if not colon or "]" in digits or not digits.isdigit():
        return None
    port = int(digits)
    return None if port == _DEFAULT_PORTS.get(scheme.lower()) else port


class Scope:
    """The seed's host (or, if allowed, its subdomains) on the seed's port: where
    pages may be requested. Another port of the same host is another service (an
    admin console, a database's HTTP API), never the site."""

    def __init__(
        self,
        seed_host: str,
        *,
        include_subdomains: bool = False,
        port: int | None = None,
        named: set[str] | None = None,
    ) -> None:
        self.host = seed_host.lower()
        self.include_subdomains = include_subdomains
        #: The seed's port, None for the default ones (80 and 443: scheme may change).
        self.port = port
        #: The seed's host and the hosts of its site its own redirects led to (a bare
        #: name answering with a 301 to ``www.``): shared by the widened scope, so
        #: what discovery learns holds for pages too.
        self.named = named if named is not None else {self.host}

    def widened(self, include_subdomains: bool) -> Scope:
        """The same scope, its subdomains included if *include_subdomains*."""
        return Scope(
            self.host, include_subdomains=include_subdomains, port=self.port, named=self.named
        )

    def adopt(self, requested: str) -> bool:
        """Take the host of *requested*, where a redirect of the seed's own sitemap or
        robots.txt led, as the seed's: whether it is newly taken. Only a host of
        the same site (``www.`` on or off) on the seed's port is: the seed's site is
        what its redirects say it is."""
        try:
            requested, host = request_target(requested)
        except UrlRefused:
            return False
        if host in self.named or not self.on_port(requested):
            return False
        if site_of(host) != site_of(self.host):
            return False
        self.named.add(host)
        return True

    def covers(self, host: str) -> bool:
        if host in self.named:
            return True
        return self.include_subdomains and any(host.endswith("." + n) for n in self.named)

    def on_port(self, requested: str) -> bool:
        return port_of(requested) == self.port

    def request_url(self, url: str, skipped: Counter[str]) -> str | None:
        """The URL to request for *url* if it is in scope, else None (the reason
        counted in *skipped*)."""
        try:
            requested, host = request_target(url)
        except UrlRefused as refused:
            skipped[refused.reason] += 1
            return None
        if not self.covers(host) or not self.on_port(requested):
            skipped["offsite"] += 1
            return None
        return requested

    def follows_redirect(self, location: str) -> bool:
        """Whether a redirect to *location* stays on the seed's site (scheme and
        ``www.`` may change; nothing else)."""
        try:
            requested, host = request_target(location)
        except UrlRefused:
            return False
        if not self.on_port(requested):
            return False
        return self.covers(host) or site_of(host) == site_of(self.host)


def is_incremental(spider: object) -> bool:
    """Whether *spider* is the incremental spider (or a subclass): it alone carries a
    page scope, ``increcrawl_scope``, and queues its own due pages; an embedding
    project's spiders do not. Here, on the ground floor, so that whatever runs in
    any crawl (``crawl/``, the middlewares) can ask without importing the spider."""
    return getattr(spider, "increcrawl_scope", None) is not None


def redirect_location(request_url: str, header: bytes) -> str:
    """The absolute URL a ``Location`` header sends to, read as Scrapy's
    RedirectMiddleware reads it."""
    location = safe_url_string(header)
    if header.startswith(b"//"):
        location = urlsplit(request_url).scheme + "://" + location.lstrip("/")
    return urljoin(request_url, location)
