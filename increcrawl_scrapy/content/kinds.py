"""Which kind of body a page is: HTML, text, or bytes to fingerprint as they are.

``Content-Type`` says what the server thinks; the body's own signature wins where it
is unmistakable (a PDF served as ``text/html`` is still a PDF), so binary formats
never reach the HTML-to-markdown converter.
"""

from __future__ import annotations

import enum

_SIGNATURES = (
    b"%PDF-",
    b"\x89PNG\r\n\x1a\n",
    b"\xff\xd8\xff",  # JPEG
    b"GIF87a",
    b"GIF89a",
    b"PK\x03\x04",  # zip: docx, xlsx, epub...
    b"\x1f\x8b",  # gzip
    b"RIFF",  # webp, wav, avi
    b"\x00\x00\x00",  # mp4/ico-like boxes and UTF-32: not text we parse
    b"OggS",
    b"ID3",
    b"wOFF",
    b"wOF2",
)
_TEXT_TYPES = ("text/", "application/json", "application/ld+json", "application/xml")
_HTML_TYPES = ("text/html", "application/xhtml+xml")


class Kind(enum.Enum):
    HTML = "html"
    TEXT = "text"
    BYTES = "bytes"


def kind_of(content_type: str | None, body: bytes) -> Kind:
    """The kind of *body*, served with *content_type* (``None`` when unsaid)."""
    head = body[:16]
    if any(head.startswith(signature) for signature in _SIGNATURES):
        return Kind.BYTES
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media in _HTML_TYPES or (not media and _looks_like_html(body)):
        return Kind.HTML
    if media.startswith(_TEXT_TYPES) or media.endswith(("+json", "+xml")):
        return Kind.TEXT
    if not media:
        return Kind.TEXT if _is_text(body) else Kind.BYTES
    return Kind.BYTES  # images, fonts, archives, application/octet-stream...


def _looks_like_html(body: bytes) -> bool:
    start = body[:512].lstrip().lower()
    return start.startswith((b"<!doctype html", b"<html", b"<head", b"<body"))


def _is_text(body: bytes) -> bool:
    sample = body[:4096]
    if b"\x00" in sample:
        return False
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start > len(sample) - 4  # a character cut by the sample's end
    return True
