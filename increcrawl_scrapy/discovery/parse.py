"""Reading sitemaps, sitemap indexes, feeds and robots.txt: streaming, bounded,
hostile-safe.

Sitemaps are parsed with lxml's ``iterparse`` and each ``<url>`` element is freed
as soon as it is read, so memory stays bounded by the body, never by a tree. The
parser resolves no entities and loads nothing from the network or the disk.
"""

from __future__ import annotations

import calendar
import functools
import io
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import NamedTuple

from lxml import etree
from protego import Protego
from scrapy.utils.gz import gunzip

#: Bumped whenever what a sitemap yields changes: identical sitemaps are re-applied.
PARSER_VERSION = 3
_GZIP_MAGIC = b"\x1f\x8b"


class SitemapError(ValueError):
    """A sitemap that cannot be read (too large, not XML, not a sitemap)."""


class SitemapEntry(NamedTuple):  # a tuple: built once per URL, cheaply
    loc: str
    lastmod: str | None
    alternate: bool = False  # an ``xhtml:link`` language version of the entry before


@dataclass
class SitemapStats:
    """What one sitemap contained, for warnings and stats."""

    kind: str = ""  # "urlset", "sitemapindex" or "feed"
    entries: int = 0
    alternates: int = 0
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> count
    recovered: bool = False  # not well-formed: read the forgiving way
    truncated: bool = False  # ...and it ended early: entries after the cut are unknown


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


def iter_sitemap(body: bytes, stats: SitemapStats) -> Iterator[SitemapEntry]:
    """Yield the entries of a sitemap (urlset or index, XML or text) or a feed
    (RSS 2.0, RSS 1.0, Atom 1.0, Media RSS): each page URL with its date.

    The kind is told by content, never by extension or Content-Type. An XML
    document that is not well-formed is read again the way Scrapy's
    ``SitemapSpider`` reads it (lxml's recovery, after bare ampersands are escaped
    and stray control characters dropped): every entry that can be read is kept,
    and ``stats.recovered`` says so (``stats.truncated`` when it ended early).
    Raises SitemapError when the document is none of these.
    """
    start = body[:64].lstrip(b"\xef\xbb\xbf \t\r\n")
    if not start.startswith(b"<"):
        yield from _iter_text(body, stats)
        return
    yielded = 0
    try:
        for entry in _iter_xml(body, stats, recover=False):
            yielded += 1
            yield entry
        return
    except etree.XMLSyntaxError as exc:
        error = str(exc)
    # Again from the start, forgiving; what was yielded already is not yielded twice.
    stats.entries, stats.kind, stats.recovered = 0, "", True
    stats.skipped.clear()
    # One entry is held back: in a document that ends early the last one may be cut
    # (``<loc>https://a.com/produ``), and a wrong URL is worse than a missing one.
    last: SitemapEntry | None = None
    for number, entry in enumerate(_iter_xml(_repair(body), stats, recover=True)):
        if last is not None:
            yield last
        last = entry if number >= yielded else None
    if last is not None:
        if stats.truncated:
            stats.entries -= 1
            stats.skipped["truncated"] += 1
        else:
            yield last
    if not stats.kind:
        raise SitemapError(f"malformed XML: {error}")


def _iter_xml(xml: bytes, stats: SitemapStats, *, recover: bool) -> Iterator[SitemapEntry]:
    parser = etree.iterparse(
        io.BytesIO(xml),
        events=("end",),
        resolve_entities=False,  # in recovery too: no entity is ever expanded
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        recover=recover,
        tag=_ENTRY_TAGS,  # an event per entry, not per element: 3x fewer
    )
    names: dict[str, str] = {}  # tag -> local name, whatever the namespace
    for _event, element in parser:  # only entries: their parts are read below
        name = _name(names, element.tag)
        if not stats.kind:
            stats.kind = _root_kind(element, name)
        entry = _Entry()
        for part in element.iterdescendants():
            tag = part.tag
            if tag.__class__ is not str:
                continue  # an unexpanded entity
            part_name = _name(names, tag)
            if part_name == "loc" and entry.loc is None and not entry.cut:
                entry.loc = _whole_text(part)  # the common case, inline
                entry.cut = entry.loc is None
            elif part_name == "lastmod":
                if entry.lastmod is None:
                    entry.lastmod = part.text or ""
            elif part_name in _READ:
                entry.read(part_name, part)
        _free(element)
        found = entry.finish(stats)
        if found is not None:
            yield found
            for alternate in entry.alternates or ():
                stats.alternates += 1
                yield SitemapEntry(alternate, None, alternate=True)
    if recover and any(error.type_name in _TRUNCATED for error in parser.error_log):
        stats.truncated = True
    if not stats.kind:
        root = _local(parser.root) if getattr(parser, "root", None) is not None else ""
        if root not in _ROOTS:
            raise SitemapError(f"root element <{root or '?'}> is not a sitemap or a feed")
        stats.kind = _ROOTS[root]


class _Entry:
    """What one ``<url>``, ``<sitemap>``, ``<item>`` or ``<entry>`` said so far."""

    __slots__ = ("alternates", "cut", "dates", "guid", "lastmod", "loc")

    def __init__(self) -> None:
        self.loc: str | None = None
        self.guid: str | None = None
        self.cut = False  # its URL's text was cut by an entity
        self.lastmod: str | None = None
        self.dates: dict[str, str] | None = None  # other dates (feeds, news), if any
        self.alternates: list[str] | None = None

    def read(self, name: str, element: etree._Element) -> None:
        """An element other than the entry's first ``<loc>`` and ``<lastmod>``."""
        parent = _local(element.getparent())
        if name == "loc":
            if parent in ("url", "sitemap"):  # an <image:loc> came before the page's
                self.loc = _whole_text(element)
                self.cut = self.loc is None
            return
        if parent not in _ENTRIES and parent != "news":
            return  # a channel's own link or date, an image's...
        if name in _DATES:
            if self.dates is None:
                self.dates = {}
            self.dates.setdefault(name, element.text or "")
        elif name == "link" and parent in ("item", "entry"):
            href = element.get("href")
            if href is not None:  # Atom: the entry's alternate link
                if self.loc is None and element.get("rel", "alternate") == "alternate":
                    self.loc = href
            elif self.loc is None:
                self.loc = _whole_text(element)
                self.cut = self.loc is None
        elif name == "link" and parent == "url" and element.get("rel") == "alternate":
            href = element.get("href")  # xhtml:link, a page's language versions
            if href:
                if self.alternates is None:
                    self.alternates = []
                self.alternates.append(href.strip())
        elif name == "guid" and element.get("isPermaLink", "true") != "false":
            self.guid = _whole_text(element)

    def finish(self, stats: SitemapStats) -> SitemapEntry | None:
        found = (self.loc or self.guid or "").strip()
        if self.cut and not self.guid:
            stats.skipped["entity"] += 1  # never another URL (the text before the entity)
            return None
        if not found:
            stats.skipped["no_loc"] += 1
            return None
        dates = self.dates
        stamp = None
        if self.lastmod:  # the common case: a sitemap's own date
            stamp = _w3c_datetime(self.lastmod, stats)
        elif dates:
            stamp = next((_date(dates[name], stats) for name in _DATES if dates.get(name)), None)
        stats.entries += 1
        return SitemapEntry(found, stamp)


def _name(names: dict[str, str], tag: str) -> str:
    """The local name of *tag*, lower case (memoized per document in *names*)."""
    name = names.get(tag)
    if name is None:
        name = names[tag] = tag.rsplit("}", 1)[-1].lower()
    return name


def _whole_text(element: etree._Element) -> str | None:
    """The element's text, or None when an unexpanded entity (or an element) cut it."""
    if len(element) or _CUT in (element.text or ""):
        return None
    return element.text or ""


def _iter_text(body: bytes, stats: SitemapStats) -> Iterator[SitemapEntry]:
    """The protocol's text format: one URL a line (blank lines and ``#`` comments
    allowed, any line ending, surrounding whitespace ignored)."""
    if b"\x00" in body[:4096]:
        raise SitemapError("binary data: neither XML nor a text sitemap")
    stats.kind = "urlset"
    text = io.TextIOWrapper(io.BytesIO(body), encoding="utf-8", errors="replace", newline=None)
    for raw in text:
        line = raw.strip().lstrip("\ufeff")
        if not line or line.startswith("#"):
            continue
        if not _URL_LINE.match(line):
            stats.skipped["not_url"] += 1
            continue
        stats.entries += 1
        yield SitemapEntry(line, None)
    if not stats.entries:
        raise SitemapError("neither XML nor a text sitemap (no line is a URL)")


def _repair(xml: bytes) -> bytes:
    """What lenient parsers do first (and the DTD dropped): bare ``&`` escaped, control
    characters gone,
    bytes that are not UTF-8 read as Windows-1252 (with no encoding declared)."""
    # A sitemap has no use for a DTD: without it, its entities are merely undefined.
    xml = _DOCTYPE.sub(b"", xml, count=1)
    xml = _CONTROL.sub(b"", _BARE_AMPERSAND.sub(b"&amp;", xml))
    # Then every named entity but XML's own is undefined: marked, so that the entry
    # it is in is skipped (libxml2's recovery would lose text after it).
    xml = _NAMED_ENTITY.sub(_CUT.encode("utf-8"), xml)
    try:
        xml.decode("utf-8")
    except UnicodeDecodeError:
        declaration = _DECLARATION.match(xml)
        rest = xml[declaration.end() :] if declaration else xml
        xml = rest.decode("cp1252", "replace").encode("utf-8")
    return xml


def _root_kind(entry: etree._Element, name: str) -> str:
    parent = entry.getparent()
    container = _local(parent) if parent is not None else ""
    if _CONTAINERS.get(name) != container and not (name == "item" and container == "rdf"):
        raise SitemapError(f"<{name}> inside <{container or '?'}>: not a sitemap or a feed")
    return _KINDS[name]


def _date(value: str, stats: SitemapStats) -> str | None:
    value = value.strip()
    if value[:1].isdigit():
        return _w3c_datetime(value, stats)
    try:  # RSS: RFC 822 ("Tue, 10 Jun 2025 04:00:00 GMT")
        stamp = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        stats.skipped["bad_lastmod"] += 1
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=timezone.utc)
    return stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The element of one entry -> the element that holds them, and the document kind.
_CONTAINERS = {"url": "urlset", "sitemap": "sitemapindex", "item": "channel", "entry": "feed"}
_ENTRIES = frozenset(_CONTAINERS)
#: Entry elements in any namespace (or none), in the spellings met in the wild.
_ENTRY_TAGS = tuple(
    f"{{*}}{spelling}" for name in _CONTAINERS for spelling in (name, name.upper(), name.title())
)
_KINDS = {"url": "urlset", "sitemap": "sitemapindex", "item": "feed", "entry": "feed"}
#: Root elements of documents with no entry at all.
_ROOTS = {
    "urlset": "urlset",
    "sitemapindex": "sitemapindex",
    "rss": "feed",
    "rdf": "feed",
    "feed": "feed",
}
#: An entry's dates, in the order they are trusted as its lastmod.
_DATES = ("lastmod", "updated", "publication_date", "pubdate", "published", "date")
#: Elements an entry reads besides its first loc and lastmod (their parent is checked).
_READ = frozenset({*_DATES, "link", "guid", "loc"})
_TRUNCATED = frozenset({"ERR_TAG_NOT_FINISHED", "ERR_DOCUMENT_EMPTY", "ERR_GT_REQUIRED"})
_BARE_AMPERSAND = re.compile(rb"&(?!(?:[A-Za-z_][\w.-]*|#[0-9]+|#x[0-9A-Fa-f]+);)")
_DOCTYPE = re.compile(rb"<!DOCTYPE[^\[>]*(?:\[.*?\]\s*)?>", re.DOTALL | re.IGNORECASE)
_NAMED_ENTITY = re.compile(rb"&(?!(?:amp|lt|gt|quot|apos);)[A-Za-z_][\w.-]*;")
#: Stands for an entity the repair removed (a private-use character, valid in XML).
_CUT = "\ue000"
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_DECLARATION = re.compile(rb"\s*<\?xml[^>]*\?>")
_URL_LINE = re.compile(r"^https?://\S+$", re.IGNORECASE)


def robots_sitemaps(robots_txt: bytes | str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt, in order."""
    text = robots_txt.decode("utf-8", "replace") if isinstance(robots_txt, bytes) else robots_txt
    return list(Protego.parse(text).sitemaps)


def _local(element: etree._Element | None) -> str:
    if element is None:
        return ""
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
    stamp = _utc(value.strip())
    if stamp is None:
        stats.skipped["bad_lastmod"] += 1
    return stamp


@functools.lru_cache(maxsize=4096)  # a sitemap repeats its dates (a deploy stamps them all)
def _utc(value: str) -> str | None:
    if _UTC_SECONDS.fullmatch(value):  # the common case: already UTC, to the second
        valid = _valid(
            int(value[:4]),
            int(value[5:7]),
            int(value[8:10]),
            int(value[11:13]),
            int(value[14:16]),
            int(value[17:19]),
        )
        return value[:19] + "Z" if valid else None
    match = _W3C.match(value)
    if not match:
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
        return None
    return stamp.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")


def _valid(year: int, month: int, day: int, hour: int, minute: int, second: int) -> bool:
    return (
        1 <= month <= 12
        and 1 <= day <= (28 if day <= 28 else calendar.monthrange(year, month)[1])
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
