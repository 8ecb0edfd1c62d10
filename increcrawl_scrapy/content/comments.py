"""Comment sections: the readers' text under a page, not the page's own. A new
comment is no edit of the post (WordPress's block themes put the comments inside
``<main>``), so they are left out of every page's main content unless
``INCRECRAWL_KEEP_COMMENTS`` keeps them.

What a comment section is comes from trafilatura's own catalog (``COMMENTS_XPATH``,
and the comment form of ``COMMENTS_DISCARD_XPATH``), the one its extraction leaves
out: WordPress's ``.wp-block-comments``, ``#comments``, ``.comments-area``,
``.commentlist``, Disqus's ``#disqus_thread`` and the like.

Its XPaths test ids and classes with EXSLT regular expressions, about 60 µs a call:
run over a post's <main> they took 16 ms. So they are run as tests of one element,
only on the elements whose id or class bears one of :data:`_SCREEN`'s words, and
never inside a section already found. The words are checked against the catalog when
it is read (every name it tests must bear one); a catalog naming anything else is
run whole on every element.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

import lxml.etree

_EXSLT = {"re": "http://exslt.org/regular-expressions"}
#: Words every name in the catalog bears (lower case).
_SCREEN = ("comment", "comol", "disqus", "dsq-", "social", "respond")


class _Catalog(NamedTuple):
    tests: tuple[lxml.etree.XPath, ...]  # each of one element (``self::*[...]``)
    screened: bool  # every name bears a word of _SCREEN


@lru_cache(maxsize=1)
def _catalog() -> _Catalog:
    from trafilatura.xpaths import COMMENTS_DISCARD_XPATH, COMMENTS_XPATH

    paths = [x.path.strip() for x in COMMENTS_XPATH]
    # Of what trafilatura discards inside a comment section, the section's form only
    # (the rest, ``cite`` and the like, is no section of its own).
    paths += [x.path.strip() for x in COMMENTS_DISCARD_XPATH if "respond" in x.path]
    tests = []
    for path in paths:
        # trafilatura reads them on its own tree, where a list is <list>: a page's is <ol>/<ul>.
        path = path.replace("self::list", "self::ol or self::ul")
        test = "self::*" + path[len(".//*") :] if path.startswith(".//*[") else path
        tests.append(lxml.etree.XPath(test, namespaces=_EXSLT))
    return _Catalog(tuple(tests), all(_all_screened(path) for path in paths))


def _all_screened(path: str) -> bool:
    """Whether each name *path* tests (each alternative of each quoted string)
    bears one of the screen's words, and it tests nothing but one element."""
    if not path.startswith(".//*["):
        return False
    names = [n for s in re.findall(r"'([^']*)'", path) for n in s.split("|")]
    return bool(names) and all(any(w in n.lower() for w in _SCREEN) for n in names)


def drop_comments(element: lxml.etree._Element) -> None:
    """Remove the comment sections inside *element* (the outermost of nested ones).
    A section the catalog names is one if its name is only a comment section's
    (:data:`_STRONG`), or if it holds what comments are: entries
    or a list of them (an element inside named for comments), a form to write one,
    or nothing yet (a placeholder a script fills, as Disqus's). The catalog's names
    are loose (``contains(@class, 'comment')``, ``id^='comments'``): a Sphinx
    section titled "Comments", an opinion column's ``div.commentary`` or a comments
    policy are a page's own text. An element holding the page's first heading is the
    page's, whatever its class says."""
    catalog = _catalog()
    found: set[lxml.etree._Element] = set()
    for candidate in element.iterdescendants():
        if not isinstance(candidate.tag, str):
            continue  # a comment node, a processing instruction
        if catalog.screened:
            names = f"{candidate.get('id', '')} {candidate.get('class', '')}".lower()
            if not any(word in names for word in _SCREEN):
                continue
        if found and any(a in found for a in candidate.iterancestors()):
            continue  # inside a section found already
        if any(test(candidate) for test in catalog.tests) and _has_comments(candidate):
            found.add(candidate)
    for section in found:
        section.drop_tree()


#: What a comment section holds: an entry or list named for comments, a form.
_COMMENTS_INSIDE = lxml.etree.XPath(
    ".//*[contains(translate(concat(@id, ' ', @class), 'COMENT', 'coment'), 'comment')]"
    " | .//form | .//textarea | self::form"
)


#: Names only a comment section bears (a class or an id, whole): no page's own text
#: is called so.
_STRONG = frozenset(
    {
        "comments-area",
        "comment-list",
        "commentlist",
        "comment-respond",
        "comment-form",
        "respond",
        "disqus_thread",
        "wp-block-comments",
        "wp-block-post-comments",
    }
)


def _has_comments(section: lxml.etree._Element) -> bool:
    if section.find(".//h1") is not None:
        return False
    names = f"{section.get('id', '')} {section.get('class', '')}".lower().split()
    if _STRONG.intersection(names):
        return True
    if not "".join(section.itertext()).strip():
        return True  # a placeholder a script fills (Disqus's #disqus_thread)
    return bool(_COMMENTS_INSIDE(section))
