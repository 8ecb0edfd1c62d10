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

# Only what is volatile by construction: a rule that also matches real content
# (a date, a time, a word such as "session") would hide real edits.

# Names of per-request tokens: CSRF/XSRF, nonces, session ids.
_NONCE_NAME = (
    r"[\w-]*(?:csrf|xsrf)[\w-]*|[\w-]*nonce|authenticity[_-]?token"
    r"|request[_-]?verification[_-]?token|(?:j|asp\.net[_-]?)?session[_-]?id|(?:php)?sessid|sid"
)
# A token value: 8+ token characters, at least one of them a digit.
_NONCE_VALUE = r"(?=[A-Za-z_\-+/=.|]*\d)[A-Za-z0-9_\-+/=.|]{8,}"
# ``name=value`` / ``name: value`` (quotes optional), as query strings and scripts write them.
_NONCE_ASSIGNMENT = rf"(?i)\b(?:{_NONCE_NAME})[\"']?[ \t]*[:=][ \t]*[\"']?{_NONCE_VALUE}[\"']?"
# The same in HTML left in the text: ``name="csrf_token" value="..."`` or ``content=``.
_NONCE_ATTRIBUTE = (
    rf"(?i)\b(?:name|id)\s*=\s*[\"'](?:{_NONCE_NAME})[\"']"
    r"[^>\n]*?\b(?:value|content)\s*=\s*[\"'][^\"'\n]*[\"']"
)
# A render timestamp where a label says it is one ("Rendered at 2024-05-01T10:00Z",
# "Page generated on 2024-05-01 10:00:03 UTC"): the label and the time go together.
_RENDER_TIMESTAMP = (
    r"(?i)\b(?:rendered|generated|served|cached|built|retrieved|fetched)(?:[ \t]+(?:at|on))?"
    r"[ \t]*:?[ \t]*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
    r"(?:[ \t]?(?:Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?))?"
    r"|\b(?:rendered|generated|served)[ \t]+in[ \t]+\d+(?:\.\d+)?[ \t]?(?:ms|s|seconds)\b"
)
# Cache-busting parameters on asset URLs (``style.css?v=3f2a9``).
_CACHE_BUSTER = (
    r"(?i)(?:(?<=\.css)|(?<=\.js)|(?<=\.mjs)|(?<=\.png)|(?<=\.jpg)|(?<=\.jpeg)|(?<=\.gif)"
    r"|(?<=\.svg)|(?<=\.webp)|(?<=\.avif)|(?<=\.woff)|(?<=\.woff2)|(?<=\.ico))"
    r"\?(?:v|ver|version|_|cb|cachebust|cache_bust|ts|timestamp|hash)=[\w.-]+"
)
# A view counter on a line of its own ("1,234 views", "Views: 1234", "Viewed 12 times").
_VIEW_COUNTER = (
    r"(?im)^[ \t]*(?:[\d][\d,.]*[ \t]*(?:views?|page[ \t]views|reads|visits)"
    r"|(?:views?|page[ \t]views|visits|hits)[ \t]*:[ \t]*[\d][\d,.]*"
    r"|viewed[ \t]+[\d][\d,.]*[ \t]+times?)[ \t]*$"
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
    _NONCE_ATTRIBUTE,
    _NONCE_ASSIGNMENT,
    _RENDER_TIMESTAMP,
    _CACHE_BUSTER,
    _VIEW_COUNTER,
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
