"""URL normalization: the one spelling of a URL that state is keyed by."""

from __future__ import annotations

import contextlib
import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus, urlsplit, urlunsplit

from w3lib.url import canonicalize_url

from increcrawl_scrapy.config import DEFAULT_TRACKING_PARAMS

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

#: Bumped whenever normalize_url's own rules change: stored keys are then re-keyed.
RULES_VERSION = 1

_DEFAULT_PORTS = {"http": 80, "https": 443}
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*"
# URLs already in normal form: lower-case scheme and ASCII host, no default port,
# no query or fragment, a path of plain segments. Most sitemap URLs are like this,
# and normalizing them would return them unchanged (tested), only 10x slower.
_ALREADY_NORMAL = re.compile(
    r"https?://[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*"
    rf"(?::(?P<port>[1-9][0-9]{{0,4}}))?/(?:{_SEGMENT}(?:/{_SEGMENT})*)?"
)


def normalize_url(
    url: str,
    *,
    tracking_params: Iterable[str] = DEFAULT_TRACKING_PARAMS,
    strip_trailing_slash: bool = True,
) -> str:
    """Return the normalized form of an absolute http(s) URL.

    Lower-case scheme and host (IDNA hosts in their ASCII form), no default port,
    no fragment, no tracking parameters (``utm_*`` style globs allowed), the query
    sorted with repeated and blank values kept, ``/`` for an empty path and, unless
    *strip_trailing_slash* is false, no trailing slash except on the root.
    Idempotent: ``normalize_url(normalize_url(u)) == normalize_url(u)``.
    """
    if not isinstance(url, str):
        raise ValueError(f"not a URL: {url!r}")
    fast = _ALREADY_NORMAL.fullmatch(url)
    if fast:
        port = fast.group("port")
        if port is None or (
            int(port) <= 65535 and int(port) != _DEFAULT_PORTS[url[:5].rstrip(":")]
        ):
            return url
    return _full_rules(url, tuple(tracking_params), strip_trailing_slash)


def normalization_settings(config: IncrecrawlConfig) -> dict[str, Any]:
    """The settings that decide a URL's key (``normalize_url`` keyword arguments)."""
    return {
        "tracking_params": tuple(config.tracking_params),
        "strip_trailing_slash": config.strip_trailing_slash,
    }


# w3lib 2.6 changed how it reads hosts (one ending in a number is IPv4: "0" is
# 0.0.0.0, "a.0" an error; percent escapes decoded; "ß" kept by IDNA) and where it
# resolves dot segments (before a last segment's ";params": "/a/..;x" stays). Keys
# must not move with w3lib: the host is spelled by the package's own rule, w3lib's
# up to 2.5 (``_host_key``), and w3lib canonicalizes the rest around a stand-in.
_STAND_IN = "increcrawl.invalid"


def _full_rules(url: str, tracking_params: tuple[str, ...], strip_trailing_slash: bool) -> str:
    parts = urlsplit(_as_special(url.strip()))
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError(f"not an absolute http(s) URL: {url!r}")
    try:
        host = parts.hostname
        port = parts.port
    except ValueError as exc:  # a port that is not a number or out of range
        raise ValueError(f"invalid URL {url!r}: {exc}") from None
    if not host:
        raise ValueError(f"URL has no host: {url!r}")
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if "[" in userinfo or "]" in userinfo:  # an error to w3lib up to 2.5, not to 2.6
        raise ValueError(f"invalid URL {url!r}: a bracket in its userinfo")
    query = _drop_tracking(parts.query, _tracking_matcher(tracking_params))
    stand_in = f"{userinfo}@{_STAND_IN}" if userinfo else _STAND_IN
    cleaned = urlunsplit((scheme, stand_in, parts.path or "/", query, ""))
    result = cleaned
    for _ in range(3):
        # Stripping a slash can expose something canonicalization removes (``/;/``
        # becomes ``/;``, then ``/``): repeat until nothing changes, so the result
        # is a fixed point and normalizing it again gives it back.
        canonical = canonicalize_url(result, keep_blank_values=True, keep_fragments=False)
        again = _slash_policy(_last_dot_segment(canonical), strip_trailing_slash)
        if again == result:
            break
        result = again
    # The canonical URL's authority (userinfo, then the stand-in) ends at its path.
    authority, _, rest = result.partition("://")[2].partition("/")
    userinfo, at, _ = authority.rpartition("@")
    return f"{scheme}://{userinfo}{at}{_host_key(host, port, scheme)}/{rest}"


def _as_special(url: str) -> str:
    """*url* with a backslash before its query or fragment read as w3lib (and a
    browser) reads it in an http(s) URL, as "/", so that urllib finds the same host."""
    start = url.find("://") + 3
    if start == 2:
        return url
    ends = (url.find("?", start), url.find("#", start))
    end = min((i for i in ends if i != -1), default=len(url))
    return url[:start] + url[start:end].replace("\\", "/") + url[end:]


def _last_dot_segment(url: str) -> str:
    """*url* (canonical) with a last segment "." or ".." before ";params" resolved,
    as w3lib did up to 2.5 (``/a/b/..;x`` is ``/a/;x``); 2.6 resolves the others."""
    parts = urlsplit(url)
    base, _, last = parts.path.rpartition("/")
    dots, semi, params = last.partition(";")
    if not semi or dots not in (".", ".."):
        return url
    if dots == "..":
        base = base.rpartition("/")[0]
    path = f"{base}/;{params}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def _host_key(host: str, port: int | None, scheme: str) -> str:
    """*host* (as urllib reads it: no brackets) and *port* in a key."""
    if ":" in host:  # an IPv6 literal
        try:
            host = f"[{ipaddress.IPv6Address(host)}]"
        except ValueError:
            host = f"[{host}]"
    elif not host.isascii():
        with contextlib.suppress(UnicodeError):  # an empty or too long label: as written
            host = unicodedata.normalize("NFKC", host).encode("idna").decode("ascii")
    # urllib lowers a host up to its first "%" only (an IPv6 zone's start).
    host = host.lower()
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    return host


def _drop_tracking(query: str, is_tracking: _Matcher) -> str:
    if not query:
        return ""
    kept = [
        pair
        for pair in query.split("&")
        if pair and not is_tracking(unquote_plus(pair.partition("=")[0]).lower())
    ]
    return "&".join(kept)


class _Matcher:
    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.exact = frozenset(p.lower() for p in patterns if not _is_glob(p))
        self.globs = tuple(p.lower() for p in patterns if _is_glob(p))

    def __call__(self, name: str) -> bool:
        return name in self.exact or any(fnmatchcase(name, glob) for glob in self.globs)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


@lru_cache(maxsize=32)
def _tracking_matcher(patterns: tuple[str, ...]) -> _Matcher:
    return _Matcher(patterns)


def _slash_policy(url: str, strip_trailing_slash: bool) -> str:
    parts = urlsplit(url)
    path = parts.path or "/"
    if strip_trailing_slash and path != "/":
        path = path.rstrip("/") or "/"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def host_of(key: str) -> str:
    """``host[:port]`` of a normalized URL (its evidence about sitemap dates is kept
    per host). The same as the SQL the schema migration fills old rows with."""
    return key.split("://", 1)[-1].split("/", 1)[0]


def same_page(key: str, other: str) -> bool:
    """Whether two normalized URLs name one page up to their scheme and ``www.``:
    ``http://site/a`` declaring ``https://www.site/a`` its canonical names itself.
    (Default ports are gone from normalized URLs; an explicit port must agree.)"""
    return _spelling_free(key) == _spelling_free(other)


def _spelling_free(key: str) -> str:
    rest = key.split("://", 1)[-1]
    return rest[4:] if rest.startswith("www.") else rest
