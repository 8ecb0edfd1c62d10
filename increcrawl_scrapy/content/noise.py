"""What made a page "change" on every fetch, and a volatile rule that would not.

``scrapy increcrawl noisy`` compares a page's last two kept versions as the
fingerprint sees them (:func:`~increcrawl_scrapy.content.fingerprint.stable_text`) and,
where the same lines differ only in some of their words, proposes a pattern for
``INCRECRAWL_VOLATILE_PATTERNS``: the line with its changing words generalized.
A proposal is offered only once it is checked to make the two versions equal.
Lines that are only links are never generalized: a link that changes on a page
is the site's (a navigation list inside the page's content), and a pattern for
one link misses the next; ``INCRECRAWL_CONTENT_SELECTOR`` is the fix.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from increcrawl_scrapy.content.fingerprint import stable_text

# Words, numbers (with their separators), runs of blanks, single other characters.
_TOKEN = re.compile(r"\d[\d,.:]*\d|\d|[^\W\d_]+|[ \t]+|.", re.DOTALL)
_NUMBER = re.compile(r"[\d,.:]+")
_WORD = re.compile(r"[\w-]+")
# A line's own blanks may differ before blanks are collapsed: match any run of them.
_BLANKS = r"[ \t\u00a0]+"
# A markdown line of links only (a list item's marker first, separators between).
_LINK = r"\[[^\]\n]{0,500}\]\([^)\n]{0,2000}\)"
_BETWEEN = "[ \t|/,\u00b7\u2022\u203a\u00bb-]{0,16}"  # blanks, bars, dots, arrows
_LINK_LINE = re.compile(rf"(?:[-*+]|\d{{1,4}}[.)])?[ \t]*{_LINK}(?:{_BETWEEN}{_LINK})*[ \t]*")


#: What a change of links on a page's text means, and its fix (the crawl's warning
#: and ``noisy`` say it alike).
LINKS_ADVICE = (
    "the site's links inside the page's text (a navigation list its main content keeps)? "
    "Set INCRECRAWL_CONTENT_SELECTOR to the element of the page's own content (a volatile "
    "pattern for one link would miss the next)"
)


def is_link_line(line: str) -> bool:
    """Whether *line* (of a page's markdown) is nothing but links."""
    return "](" in line and _LINK_LINE.fullmatch(line.strip()) is not None


def link_lines(text: str) -> list[str]:
    """The lines of *text* that are nothing but links."""
    return [line.strip() for line in text.split("\n") if is_link_line(line)]


@dataclass(frozen=True)
class Difference:
    """The lines two versions do not share, as the fingerprint sees them."""

    removed: tuple[str, ...]
    added: tuple[str, ...]

    @property
    def links_only(self) -> bool:
        """Whether every differing line is a line of links (and some differ)."""
        lines = (*self.removed, *self.added)
        return bool(lines) and all(is_link_line(line) for line in lines)


def differing_lines(before: str, after: str, patterns: Iterable[str] = ()) -> Difference:
    old = stable_text(before, patterns).split("\n")
    new = stable_text(after, patterns).split("\n")
    removed: list[str] = []
    added: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            removed += old[i1:i2]
            added += new[j1:j2]
    return Difference(tuple(removed), tuple(added))


def line_pattern(old: str, new: str) -> str | None:
    """A pattern matching both lines whole, their shared words literal and the
    words that differ generalized; None when they share no words (not one line
    edited, but different lines)."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    parts: list[str] = []
    shared = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            literal = "".join(a[i1:i2])
            shared += sum(1 for token in a[i1:i2] if token.strip())
            parts.append(_literal(literal))
        else:
            parts.append(_general("".join(a[i1:i2]), "".join(b[j1:j2])))
    if not shared:
        return None
    return rf"(?m)^[ \t]*{''.join(parts)}[ \t]*$"


def _literal(text: str) -> str:
    return _BLANKS.join(re.escape(piece) for piece in re.split(r"[ \t\u00a0]+", text))


def _general(old: str, new: str) -> str:
    sides = [side for side in (old, new) if side]
    optional = len(sides) < 2
    if all(_NUMBER.fullmatch(side) for side in sides):
        body = r"\d[\d,.:]*"
    elif all(_WORD.fullmatch(side) for side in sides):
        body = r"[\w-]+"
    else:
        body = r"[^\n]*?"
        optional = False  # already matches nothing
    return f"(?:{body})?" if optional else body


def propose(pairs: Sequence[tuple[str, str]], patterns: Iterable[str] = ()) -> list[str]:
    """Patterns (one per line shape) that make each ``(before, after)`` pair equal
    once added to *patterns*; empty when no such set is found."""
    patterns = tuple(patterns)
    proposed: list[str] = []
    for before, after in pairs:
        difference = differing_lines(before, after, (*patterns, *proposed))
        if not difference.removed and not difference.added:
            continue
        if difference.links_only:
            return []  # the site's links: INCRECRAWL_CONTENT_SELECTOR, not a pattern
        if len(difference.removed) != len(difference.added):
            return []  # lines came or went: content, or a block no line rule describes
        for old, new in zip(difference.removed, difference.added, strict=True):
            pattern = line_pattern(old, new)
            if pattern is None:
                return []
            if pattern not in proposed:
                proposed.append(pattern)
    every = (*patterns, *proposed)
    if all(stable_text(before, every) == stable_text(after, every) for before, after in pairs):
        return proposed
    return []
