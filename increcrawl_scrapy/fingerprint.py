"""Content fingerprints that ignore what changes on every render.

Every volatile rule lives in :data:`VOLATILE_PATTERNS`; sites add their own
through ``INCRECRAWL_VOLATILE_PATTERNS``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache

from increcrawl_scrapy.config import ConfigError

_ISO_TIMESTAMP = (
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
    r"(?:\s?(?:Z|UTC|[+-]\d{2}(?::?\d{2})?))?\b"
)
# A token name, an optional quote, ``=`` or ``:``, and the token value.
_NONCE_ASSIGNMENT = (
    r"(?i)\b[\w-]*(?:csrf|xsrf|nonce|session)[\w-]*[\"']?\s*[:=]\s*[\"']?"
    r"[A-Za-z0-9_\-+/=.]{6,}[\"']?"
)
# The same in HTML left in the text: ``name="csrf_token" value="..."`` or ``content=``.
_NONCE_ATTRIBUTE = (
    r"(?i)\b(?:name|id)\s*=\s*[\"'][\w-]*(?:csrf|xsrf|nonce|session)[\w-]*[\"']"
    r"[^>\n]*?\b(?:value|content)\s*=\s*[\"'][^\"'\n]*[\"']"
)


def _related_section(level: int) -> str:
    # A "Related posts/articles" heading of this level and everything up to the
    # next heading of the same or a higher level (its own sub-headings go with it).
    return (
        rf"(?ims)^[ \t]*#{{{level}}}[ \t]+related[ \t]+(?:posts|articles)\b[^\n]*"
        rf"(?:\n(?![ \t]*#{{1,{level}}}[ \t])[^\n]*)*"
    )


#: The default volatile rules, applied in this order. Each match is deleted.
VOLATILE_PATTERNS: tuple[str, ...] = (
    *(_related_section(level) for level in range(1, 7)),
    _ISO_TIMESTAMP,
    _NONCE_ATTRIBUTE,
    _NONCE_ASSIGNMENT,
)

_BLANKS = re.compile(r"[ \t\u00a0]+")


def compile_patterns(extra_patterns: Iterable[str] = ()) -> tuple[re.Pattern[str], ...]:
    """Compile the defaults plus *extra_patterns*; a bad one raises ConfigError."""
    return _compile(tuple(extra_patterns))


@lru_cache(maxsize=16)
def _compile(extra: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    compiled = [re.compile(p) for p in VOLATILE_PATTERNS]
    for pattern in extra:
        try:
            compiled.append(re.compile(pattern, re.MULTILINE))
        except re.error as exc:
            raise ConfigError(
                "INCRECRAWL_VOLATILE_PATTERNS", pattern, f"not a valid regular expression ({exc})"
            ) from None
    return tuple(compiled)


def stable_text(markdown: str, extra_patterns: Iterable[str] = ()) -> str:
    """The text a fingerprint is taken of: volatile parts and blank lines removed."""
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    for pattern in compile_patterns(extra_patterns):
        text = pattern.sub("", text)
    lines = (_BLANKS.sub(" ", line).strip() for line in text.split("\n"))
    return "\n".join(line for line in lines if line)


def content_fingerprint(markdown: str, extra_patterns: Iterable[str] = ()) -> str:
    """SHA-256 hex digest of :func:`stable_text`."""
    return hashlib.sha256(stable_text(markdown, extra_patterns).encode("utf-8")).hexdigest()
