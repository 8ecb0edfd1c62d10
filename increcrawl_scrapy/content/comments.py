"""Comment sections: the readers' text under a page, not the page's own. A new
comment is no edit of the post (WordPress's block themes put the comments inside
``<main>``), so they are left out of every page's main content unless
``INCRECRAWL_KEEP_COMMENTS`` keeps them.

What a comment section is comes from trafilatura's own catalog (``COMMENTS_XPATH``,
and the comment form of ``COMMENTS_DISCARD_XPATH``), the one its extraction leaves
out: WordPress's ``.wp-block-comments``, ``#comments``, ``.comments-area``,
``.commentlist``, Disqus's ``#disqus_thread`` and the like.
"""

from __future__ import annotations

from functools import lru_cache

import lxml.etree

_EXSLT = {"re": "http://exslt.org/regular-expressions"}


@lru_cache(maxsize=1)
def comment_sections() -> tuple[lxml.etree.XPath, ...]:
    from trafilatura.xpaths import COMMENTS_DISCARD_XPATH, COMMENTS_XPATH

    paths = [x.path for x in COMMENTS_XPATH]
    # Of what trafilatura discards inside a comment section, the section's form only
    # (the rest, ``cite`` and the like, is no section of its own).
    paths += [x.path for x in COMMENTS_DISCARD_XPATH if "respond" in x.path]
    # trafilatura reads them on its own tree, where a list is <list>: a page's is <ol>/<ul>.
    return tuple(
        lxml.etree.XPath(path.replace("self::list", "self::ol or self::ul"), namespaces=_EXSLT)
        for path in paths
    )


def drop_comments(element: lxml.etree._Element) -> None:
    """Remove the comment sections inside *element* (the outermost of nested ones).
    An element holding a heading of the page's first level is the page's, whatever
    its class says (``<div class="post has-comments">``): it is kept."""
    found = {e for xpath in comment_sections() for e in xpath(element)}
    sections = {e for e in found if e is not element and e.find(".//h1") is None}
    for section in sections:
        if not any(a in sections for a in section.iterancestors()):
            section.drop_tree()
