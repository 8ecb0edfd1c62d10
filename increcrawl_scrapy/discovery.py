"""Reading sitemaps, sitemap indexes and robots.txt: streaming, bounded, hostile-safe.

Sitemaps are parsed with lxml's ``iterparse`` and each ``<url>`` element is freed
as soon as it is read, so memory stays bounded by the body, never by a tree. The
parser resolves no entities and loads nothing from the network or the disk.
"""

from __future__ import annotations

import calendar
import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from lxml import etree
from protego import Protego
from scrapy.utils.gz import gunzip

#: Bumped whenever what a sitemap yields changes: identical sitemaps are re-applied.
PARSER_VERSION = 2
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
    read before a syntax error have been yielded already. Any namespace (or none)
    is accepted: sites get it wrong often enough.
    """
    parser = etree.iterparse(
        io.BytesIO(xml),
        events=("end",),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    loc = lastmod = None
    names: dict[str, str] = {}  # tag -> local name, whatever the namespace
    try:
        for _event, element in parser:
            tag = element.tag
            if tag.__class__ is not str:
                continue
            name = names.get(tag)
            if name is None:
                name = names[tag] = tag.rsplit("}", 1)[-1].lower()
            if name == "loc":
                if loc is None or _local(element.getparent()) in ("url", "sitemap"):
                    loc = element.text  # an <image:loc> after the page's own is not it
            elif name == "lastmod":
                lastmod = element.text
            elif name in ("url", "sitemap"):
                if not stats.kind:
                    stats.kind = _root_kind(element)
                _free(element)
                found = loc.strip() if loc else None
                stamp = _w3c_datetime(lastmod, stats) if lastmod and found else None
                loc = lastmod = None
                if not found:
                    stats.skipped["no_loc"] += 1
                    continue
                stats.entries += 1
                yield SitemapEntry(found, stamp)
    except etree.XMLSyntaxError as exc:
        raise SitemapError(f"malformed XML: {exc}") from None
    if not stats.kind:
        root = _local(parser.root) if getattr(parser, "root", None) is not None else ""
        if root not in ("urlset", "sitemapindex"):
            raise SitemapError(f"root element <{root or '?'}> is not a sitemap")
        stats.kind = root


def _root_kind(entry: etree._Element) -> str:
    parent = entry.getparent()
    kind = _local(parent) if parent is not None else ""
    if kind not in ("urlset", "sitemapindex"):
        raise SitemapError(f"<{_local(entry)}> inside <{kind or '?'}>: not a sitemap")
    return kind


def robots_sitemaps(robots_txt: bytes | str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt, in order."""
    text = robots_txt.decode("utf-8", "replace") if isinstance(robots_txt, bytes) else robots_txt
    return list(Protego.parse(text).sitemaps)


def _local(element: etree._Element) -> str:
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def _free(element: etree._Element) -> None:
    # Release what was read: the element and the siblings before it.
    element.clear()
    parent = element.getparent()
    if parent is not None:
        while element.getprevious() is not None:
            del parent[0]


_UTC_SECONDS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:Z|\+00:00)")
_W3C = re.compile(
    r"^(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:[Tt ](?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.(?P<f>\d+))?)?"
    r"(?P<tz>[Zz]|[+-]\d{2}:?\d{2})?)?)?)?$"
)


def _w3c_datetime(value: str, stats: SitemapStats) -> str | None:
    """A W3C datetime (any precision the protocol allows) as ISO 8601 UTC, or None."""
    value = value.strip()
    if _UTC_SECONDS.fullmatch(value):  # the common case: already UTC, to the second
        parts = [
            int(value[a:b]) for a, b in ((0, 4), (5, 7), (8, 10), (11, 13), (14, 16), (17, 19))
        ]
        if _valid(*parts):
            return value[:19] + "Z"
        stats.skipped["bad_lastmod"] += 1
        return None
    match = _W3C.match(value)
    if not match:
        stats.skipped["bad_lastmod"] += 1
        return None
    y, m, d, hh, mm, ss, fraction, zone = match.groups()
    try:
        stamp = datetime(
            int(y),
            int(m or 1),
            int(d or 1),
            int(hh or 0),
            int(mm or 0),
            int(ss or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=_zone(zone),
        )
    except ValueError:
        stats.skipped["bad_lastmod"] += 1
        return None
    return stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def _valid(year: int, month: int, day: int, hour: int, minute: int, second: int) -> bool:
    return (
        1 <= month <= 12
        and 1 <= day <= calendar.monthrange(year, month)[1]
        and hour < 24
        and minute < 60
        and second < 60
    )


def _zone(text: str | None) -> timezone:
    if not text or text in ("Z", "z"):
        return timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    return timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:])))
