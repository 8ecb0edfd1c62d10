"""Content fingerprints that ignore what changes on every render.

Every volatile rule lives in :data:`VOLATILE_PATTERNS`; sites add their own
through ``INCRECRAWL_VOLATILE_PATTERNS``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from increcrawl_scrapy import compat
from increcrawl_scrapy.config.reads import compile_user_pattern

# Only what is volatile by construction: a rule that also matches real content
# (a date, a time, a word such as "session") would hide real edits.

# Every repetition that could start over at each position is bounded, so that no
# default rule is quadratic (40 KB of "a-a-a-..." took 56 s with unbounded ones):
# each rule is linear in the text, tested on adversarial inputs of 1 MB.
# Names of per-request tokens: CSRF/XSRF, nonces, session ids.
_NONCE_NAME = (
    r"[\w-]{0,32}(?:csrf|xsrf)[\w-]{0,32}|[\w-]{0,32}nonce|authenticity[_-]?token"
    r"|request[_-]?verification[_-]?token|(?:j|asp\.net[_-]?)?session[_-]?id|(?:php)?sessid|sid"
)
# A token value: 8+ token characters, at least one of them a digit.
_NONCE_VALUE = r"(?=[A-Za-z_\-+/=.|]{0,64}\d)[A-Za-z0-9_\-+/=.|]{8,4096}"
# ``name=value`` / ``name: value`` (quotes optional), as query strings and scripts write them.
# A name starts where no name character precedes it: starting again inside a long
# run of them ("csrf-csrf-...") would try the run from every position.
_NONCE_ASSIGNMENT = (
    rf"(?i)(?<![\w-])(?:{_NONCE_NAME})[\"']?[ \t]{{0,8}}[:=][ \t]{{0,8}}[\"']?"
    rf"{_NONCE_VALUE}[\"']?"
)
# The same in HTML left in the text: ``name="csrf_token" value="..."`` or ``content=``.
_NONCE_ATTRIBUTE = (
    rf"(?i)\b(?:name|id)[ \t]{{0,8}}=[ \t]{{0,8}}[\"'](?:{_NONCE_NAME})[\"']"
    r"[^>\n]{0,128}?\b(?:value|content)[ \t]{0,8}=[ \t]{0,8}[\"'][^\"'\n]{0,4096}[\"']"
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


# Each default rule with the words it cannot match without (lower case): a rule whose
# words are all absent from a page is not run on it, which spares most pages most
# rules. One table, so that no rule is ever added without its words.
_RELATED = ("related",)
_DEFAULTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    *((_related_section(level), _RELATED) for level in range(1, 7)),
    (_NONCE_ATTRIBUTE, ("value", "content")),
    (
        _NONCE_ASSIGNMENT,
        ("csrf", "xsrf", "nonce", "authenticity", "verification", "session", "sid"),
    ),
    (
        _RENDER_TIMESTAMP,
        ("rendered", "generated", "served", "cached", "built", "retrieved", "fetched"),
    ),
    (_CACHE_BUSTER, ("?",)),
    (_VIEW_COUNTER, ("view", "read", "visit", "hit")),
)
#: The default volatile rules, applied in this order. Each match is deleted.
VOLATILE_PATTERNS: tuple[str, ...] = tuple(pattern for pattern, _ in _DEFAULTS)
_TRIGGERS: tuple[tuple[str, ...], ...] = tuple(words for _, words in _DEFAULTS)
#: A user's rule may take this long on one page (the ``regex`` module's timeout).
USER_PATTERN_SECONDS = 1.0

# Runs of blanks become one space; a lone space is left alone (most of them: not
# replacing each of them halves the fingerprint's cost).
_BLANKS = re.compile(r"[ \t\u00a0]{2,}|[\t\u00a0]")


class PatternTimeout(RuntimeError):
    """A rule of INCRECRAWL_VOLATILE_PATTERNS took too long on a page."""

    def __init__(self, pattern: str) -> None:
        super().__init__(
            f"INCRECRAWL_VOLATILE_PATTERNS rule {pattern!r} took over "
            f"{USER_PATTERN_SECONDS:g} s on a page (it backtracks: bound its repetitions)"
        )
        self.pattern = pattern


def compile_patterns(extra_patterns: Iterable[str] = ()) -> tuple[Any, ...]:
    """Compile the defaults plus *extra_patterns*; a bad one raises ConfigError."""
    return _compile(tuple(extra_patterns))


@lru_cache(maxsize=16)
def _compile(extra: tuple[str, ...]) -> tuple[Any, ...]:
    compiled: list[Any] = [re.compile(p) for p in VOLATILE_PATTERNS]
    compiled.extend(compile_user_pattern(pattern) for pattern in extra)
    return tuple(compiled)


def stable_text(markdown: str, extra_patterns: Iterable[str] = ()) -> str:
    """The text a fingerprint is taken of: volatile parts and blank lines removed.
    Raises PatternTimeout when a user's rule takes too long."""
    text = markdown.replace("\r\n", "\n").replace("\r", "\n")
    lower = text.lower()
    present: dict[int, bool] = {}  # by trigger words (six rules share one set)
    for index, pattern in enumerate(compile_patterns(extra_patterns)):
        if index < len(_DEFAULTS):
            words = _TRIGGERS[index]
            found = present.get(id(words))
            if found is None:
                found = present[id(words)] = any(word in lower for word in words)
            if not found:
                continue
            text, count = pattern.subn("", text)
        else:
            try:
                text, count = pattern.subn("", text, timeout=USER_PATTERN_SECONDS)
            except TimeoutError:
                raise PatternTimeout(pattern.pattern) from None
        if count:
            lower = text.lower()  # a deletion may join words
            present.clear()
    if "  " in text or "\t" in text or "\u00a0" in text:  # most pages have none
        text = _BLANKS.sub(" ", text)
    lines = (line.strip() for line in text.split("\n"))
    return "\n".join(filter(None, lines))


def content_fingerprint(markdown: str, extra_patterns: Iterable[str] = ()) -> str:
    """SHA-256 hex digest of :func:`stable_text`."""
    return digest(stable_text(markdown, extra_patterns))


def digest(stable: str) -> str:
    """The fingerprint of a text :func:`stable_text` gave."""
    return hashlib.sha256(stable.encode("utf-8")).hexdigest()


class TakenPrints:
    """Fingerprints of the default rules taken beforehand (with the page's text, on
    the content thread), by the text they were taken of: what records that text later
    finds its fingerprint here instead of taking it on the reactor's thread. A text
    changed in between (a user's callback or pipeline) is simply not found. Used on
    the reactor's thread only; bounded in entries and in characters (texts nobody
    recorded are forgotten, the oldest first)."""

    def __init__(self, size: int = 256, chars: int = 8 * 1024 * 1024) -> None:
        self.size, self.chars = size, chars
        self._by_text: dict[str, str] = {}
        self._chars_kept = 0  # characters of the texts kept as keys

    def put(self, text: str, fingerprint: str) -> None:
        if len(text) > self.chars or text in self._by_text:
            return
        while self._by_text and (
            len(self._by_text) >= self.size or self._chars_kept + len(text) > self.chars
        ):
            self.pop(next(iter(self._by_text)))  # the oldest
        self._by_text[text] = fingerprint
        self._chars_kept += len(text)

    def __contains__(self, text: str) -> bool:
        return text in self._by_text

    def pop(self, text: str) -> str | None:
        taken = self._by_text.pop(text, None)
        if taken is not None:
            self._chars_kept -= len(text)
        return taken


def taken_prints(crawler: Any) -> TakenPrints:
    """The fingerprints taken beforehand in *crawler*'s crawl."""
    return compat.of_crawl(crawler, "taken_prints", TakenPrints)
