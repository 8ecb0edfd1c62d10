"""Reading sitemaps, sitemap indexes and robots.txt: streaming, bounded, hostile-safe.

Sitemaps are parsed with lxml's ``iterparse`` and each ``<url>`` element is freed
as soon as it is read, so memory stays bounded by the body, never by a tree. The
parser resolves no entities and loads nothing from the network or the disk.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from lxml import etree
from protego import Protego
from scrapy.utils.gz import gunzip

from increcrawl_scrapy.urls import same_host

MAX_URL_LENGTH = 2048
_GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(ValueError):
    """A sitemap that cannot be read (too large, not XML, not a sitemap)."""


@dataclass(frozen=True)
class SitemapEntry:
    loc: str
    lastmod: str | None


@dataclass
class SitemapStats:
    """What one sitemap contained, for warnings and stats."""

    kind: str = ""  # "urlset" or "sitemapindex"
    entries: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count


def decompress(body: bytes, max_bytes: int) -> bytes:
    """The sitemap's XML: gunzipped when gzipped, at most *max_bytes* either way."""
    if body[:2] == _GZIP_MAGIC:
        try:
            body = gunzip(body, max_size=max_bytes)
        except ValueError as exc:  # includes Scrapy's max-size error
            raise SitemapError(f"gzip body is too large or broken: {exc}") from None
        except OSError as exc:
            raise SitemapError(f"gzip body is broken: {exc}") from None
    if len(body) > max_bytes:
        raise SitemapError(f"sitemap is {len(body)} bytes, over the limit of {max_bytes}")
    return body


def iter_sitemap(xml: bytes, stats: SitemapStats) -> Iterator[SitemapEntry]:
    """Yield the ``<loc>``/``<lastmod>`` pairs of a urlset or a sitemap index.

    Raises SitemapError when the document is not XML or not a sitemap; entries
    read before a syntax error have been yielded already.
    """
    parser = etree.iterparse(
        io.BytesIO(xml),
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        for event, element in parser:
            name = _local(element)
            if event == "start":
                if not stats.kind:
                    if name not in ("urlset", "sitemapindex"):
                        raise SitemapError(f"root element <{name}> is not a sitemap")
                    stats.kind = name
                continue
            if name not in ("url", "sitemap"):
                continue
            loc, lastmod = _child_text(element, "loc"), _child_text(element, "lastmod")
            _free(element)
            if not loc:
                stats.skipped["no_loc"] += 1
                continue
            stats.entries += 1
            yield SitemapEntry(loc, _w3c_datetime(lastmod, stats) if lastmod else None)
    except etree.XMLSyntaxError as exc:
        raise SitemapError(f"malformed XML: {exc}") from None
    if not stats.kind:
        raise SitemapError("empty document")


def in_scope(
    loc: str, seed_host: str, stats: SitemapStats, *, include_subdomains: bool = False
) -> bool:
    """Whether a sitemap URL may be crawled: http(s), on the seed's host, not huge."""
    if len(loc) > MAX_URL_LENGTH:
        stats.skipped["too_long"] += 1
        return False
    scheme = loc.split(":", 1)[0].lower() if ":" in loc else ""
    if scheme not in ("http", "https"):
        stats.skipped["bad_scheme"] += 1
        return False
    if not same_host(loc, seed_host, include_subdomains=include_subdomains):
        stats.skipped["offsite"] += 1
        return False
    return True


def robots_sitemaps(robots_txt: bytes | str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt, in order."""
    text = robots_txt.decode("utf-8", "replace") if isinstance(robots_txt, bytes) else robots_txt
    return list(Protego.parse(text).sitemaps)


def _local(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _child_text(element: etree._Element, name: str) -> str | None:
    for child in element:
        if _local(child) == name:
            text = child.text
            return text.strip() if text else None
    return None


def _free(element: etree._Element) -> None:
    # Release what was read: the element and the siblings before it.
    element.clear()
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


_W3C = re.compile(
    r"^(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[Tt ](?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d+))?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}:?\d{2})?)?)?)?$"
)


def _w3c_datetime(value: str, stats: SitemapStats) -> str | None:
    """A W3C datetime (any precision the protocol allows) as ISO 8601 UTC, or None."""
    match = _W3C.match(value.strip())
    if not match:
        stats.skipped["bad_lastmod"] += 1
        return None
    parts = match.groupdict()
    try:
        stamp = datetime(
            int(parts["y"]),
            int(parts["m"] or 1),
            int(parts["d"] or 1),
            int(parts["H"] or 0),
            int(parts["M"] or 0),
            int(parts["S"] or 0),
            int((parts["f"] or "0")[:6].ljust(6, "0")),
            tzinfo=_zone(parts["tz"]),
        )
    except ValueError:
        stats.skipped["bad_lastmod"] += 1
        return None
    return stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def _zone(text: str | None) -> timezone:
    if not text or text in ("Z", "z"):
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
