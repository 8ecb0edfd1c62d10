"""trafilatura's catalog of the containers that name a page's content (``<div
class="post">``, ``id="content"``, ``itemprop="articleBody"``...), of the parts
inside them that are no content, and its step that prunes those: read once, as one
test of an element, so that a page's candidates are read in one pass
(``content/main.py``'s third step)."""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any, NamedTuple

import lxml.etree

#: Every name in trafilatura's catalog is borne by one of these.
_NAMED_TAGS = ("article", "div", "main", "section")
_EXSLT = {"re": "http://exslt.org/regular-expressions"}


class _Catalog(NamedTuple):
    """trafilatura's XPaths of the containers that name a page's content, of the
    parts inside them that are no content, and its step that prunes those."""

    names: list[Any]
    discard: list[Any]
    prune: Callable[..., Any]
    #: The names as one test of one element (bit i: it bears name i), so that a page
    #: is read in one pass over its candidates; None when trafilatura writes a name
    #: in a shape :func:`_as_test` does not know (each name then reads the page).
    bits: lxml.etree.XPath | None
    #: The bits of the names that name the page's first <main> too (``|(.//main)[1]``).
    mains: int

    def firsts(self, root: lxml.etree._Element) -> list[Any]:
        """For each name, in the catalog's order, the first element of the page
        (in its order) that bears it, as trafilatura's XPath finds it; or None."""
        if self.bits is None:
            return [
                next((e for e in xpath(root) if isinstance(e, lxml.etree._Element)), None)
                for xpath in self.names
            ]
        # One XPath a candidate rather than one a name over the whole page: on 638
        # real pages a third of the CPU, and fewer calls that let go of the GIL and
        # must wait to take it back while the reactor's thread holds it.
        found: list[Any] = [None] * len(self.names)
        first_main = next(root.iter("main"), None)
        for element in root.iter(*_NAMED_TAGS):
            bits = int(self.bits(element)) if element.attrib else 0
            if element is first_main:
                bits |= self.mains
            for i in range(len(found)):
                if found[i] is None and bits >> i & 1:
                    found[i] = element
            if None not in found:
                break
        return found


@lru_cache(maxsize=1)
def named_catalog() -> _Catalog:
    from trafilatura.htmlprocessing import prune_unwanted_nodes
    from trafilatura.xpaths import BODY_XPATH, OVERALL_DISCARD_XPATH

    # Not those that only name the first <article> or <main>: a page's one is taken
    # before, and the first of several is not the page.
    names = [x for x in BODY_XPATH if x.path.strip() not in ("(.//article)[1]", "(.//main)[1]")]
    tests = [_as_test(x.path) for x in names]
    bits = None
    if all(tests):
        # Elements without attributes are not read: no name may be borne without one
        # (and every name must compile and run, its functions' prefixes known).
        try:
            bits = lxml.etree.XPath(
                " + ".join(f"number(boolean({t[0]})) * {1 << i}" for i, t in enumerate(tests) if t),
                namespaces=_EXSLT,
            )
            if any(bits(lxml.etree.Element(tag)) for tag in _NAMED_TAGS):
                bits = None
        except lxml.etree.XPathError:  # its syntax errors too
            bits = None
    mains = sum(1 << i for i, t in enumerate(tests) if t and t[1])
    return _Catalog(names, list(OVERALL_DISCARD_XPATH), prune_unwanted_nodes, bits, mains)


def _as_test(path: str) -> tuple[str, bool] | None:
    """A name of trafilatura's, ``.//*[self::div or ...][...]`` taking its first
    match (``[1]`` or ``(...)[1]``, perhaps ``|(.//main)[1]``), as a test of one
    element (``self::*[...]``) and whether it names the first <main> too; None for
    any other shape (a tag not among the candidates, a position, a union)."""
    path, main = path.strip(), False
    if path.endswith("|(.//main)[1]"):
        path, main = path[: -len("|(.//main)[1]")].strip(), True
    if path.startswith("(") and path.endswith(")[1]"):
        path = path[1:-4].strip()
    elif path.endswith("][1]"):
        path = path[:-3]
    if not path.startswith(".//*"):
        return None
    predicates = _predicates(path[len(".//*") :])
    if not predicates:
        return None
    tags = re.fullmatch(r"self::\w+(\s+or\s+self::\w+)*", " ".join(predicates[0].split()))
    if not tags or not set(re.findall(r"self::(\w+)", predicates[0])) <= set(_NAMED_TAGS):
        return None  # an element the pass over the candidates would not see
    if any(re.fullmatch(r"\s*\d+\s*", p) or "position(" in p or "last(" in p for p in predicates):
        return None  # a position means another thing on one element
    return "self::*" + "".join(f"[{p}]" for p in predicates), main


def _predicates(text: str) -> list[str] | None:
    """The bodies of *text*'s XPath predicates (``[...][...]``), or None when it
    is anything else: brackets balanced outside quoted strings, nothing outside."""
    found, depth, quote, body = [], 0, "", ""
    for char in text:
        if depth == 0:
            if char == "[":
                depth, body = 1, ""
            elif not char.isspace():
                return None
            continue
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                found.append(body)
                continue
        body += char
    return found if found and depth == 0 else None
