"""A page's main content: the part of the HTML that is the page's own, not the site's.

In this order:

1. ``INCRECRAWL_CONTENT_SELECTOR`` (CSS, or XPath when it starts with ``/`` or
   ``(``), for a user who knows the site's main element;
2. the page's one ``<main>`` / ``role="main"`` element, else its one ``<article>``:
   what MkDocs, Sphinx, Hugo themes, WordPress and most generators mark. Measured
   on real generators (``benchmarks/real_sites.py``) it is as exact as the libraries
   below and several times cheaper, and it keeps code blocks and tables whole;
3. otherwise the one container the page names as its content (``<div class="post">``,
   ``id="content"``, ``itemprop="articleBody"``…: trafilatura's own catalog of such
   names, in its order: ``content/named_catalog.py``), less what trafilatura's
   catalog names as no content (share and consent boxes, comment forms, hidden
   parts), when it holds enough text: the element trafilatura's extraction starts
   from, taken whole, at the cost of one pass over the page's candidate elements
   (the page's text and markdown in about 0.4 ms against 1.3 ms through
   trafilatura, on ``benchmarks/content_throughput.py``'s pages).
   A named container that is one tab of the page (a shop's product description, in a
   ``role="tabpanel"``) is not the page: the smallest element around it holding the
   page's title (its ``<h1>``) is, with the price, the summary and every tab;
4. otherwise trafilatura's extraction (a well-kept library), for pages that name
   nothing;
5. and where that finds little (a short page), the whole body, less the site's
   header, navigation, sidebars and footer, when it has more text: the rescue
   trafilatura would make, but keeping the page's structure (its headings), so the
   text has the same shape whichever way it was found.

A page too large for steps 3 and 4 (``extract=False``: their cost grows faster than
the page, minutes for a 10 MB table) goes from step 2 to the whole body, "cut".

Inside the chosen element, navigation, sidebars, footers and search boxes are
left out (``nav``, ``aside``, ``footer`` and their ARIA roles): previous/next
links and "on this page" boxes sit inside the main element on many themes. An
``aside`` with a ``doc-*`` role (a footnote, an endnote) is the page's own. Comment
sections are left out too (``content/comments.py``), unless kept (``keep_comments``); a
selector's element is taken as it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from copy import deepcopy
from functools import lru_cache
from typing import Any, NamedTuple

import lxml.etree
import lxml.html
from cssselect import GenericTranslator, SelectorError

from increcrawl_scrapy.content.comments import drop_comments
from increcrawl_scrapy.content.named_catalog import named_catalog
from increcrawl_scrapy.content.parse import parse_fragment, parse_html

logger = logging.getLogger(__name__)

#: How the main content was found, in the order tried.
HOW = ("selector", "main", "article", "named", "extracted", "whole", "cut")

_MAIN = lxml.etree.XPath("//main | //*[@role='main']")
_ARTICLE = lxml.etree.XPath("//article")
#: The site's template: its elements by tag and by ARIA role (one list for each use).
_TEMPLATE_TAGS = ("nav", "aside", "footer")
_TEMPLATE_ROLES = ("navigation", "complementary", "contentinfo", "search")


#: An ``<aside>`` of the document's own (DPUB-ARIA's ``doc-*`` roles: footnotes,
#: endnotes, notes; docutils writes Sphinx's footnotes so) is no sidebar of the site's.
_TAG_TESTS = {
    "aside": "self::aside[not(starts-with(@role, 'doc-') or .//*[starts-with(@role, 'doc-')])]"
}


def _any_of(tags: tuple[str, ...], roles: tuple[str, ...]) -> str:
    """An XPath predicate: an element of one of *tags*, or of one of *roles*."""
    tests = [_TAG_TESTS.get(tag, f"self::{tag}") for tag in tags]
    return " or ".join(tests + [f"@role='{role}'" for role in roles])


_TEMPLATE_INSIDE = lxml.etree.XPath(f".//*[{_any_of(_TEMPLATE_TAGS, _TEMPLATE_ROLES)}]")
#: In a whole body, the site's header too (inside a main element, or around the
#: page's title, a header is the article's own).
_TEMPLATE_OF_BODY = lxml.etree.XPath(
    f".//header[not(.//h1)] | .//*[{_any_of(_TEMPLATE_TAGS, ('banner', *_TEMPLATE_ROLES))}]"
)
#: A container the page names as its content is not the page's inside any of these.
_IN_TEMPLATE = lxml.etree.XPath(
    f"ancestor::*[{_any_of(('header', *_TEMPLATE_TAGS), ('banner', *_TEMPLATE_ROLES))}]"
)
_NOTHING = lxml.etree.XPath("self::nothing-at-all")
#: A tab of the page: one part of its content, never all of it.
_TAB_PANEL = lxml.etree.XPath("ancestor-or-self::*[@role='tabpanel']")
#: trafilatura's own threshold (MIN_EXTRACTED_SIZE): an extraction shorter than this
#: is rescued with the whole page's text.
RESCUE_CHARS = 250
_INVISIBLE = lxml.etree.XPath(
    ".//script | .//style | .//noscript | .//template | .//*[@hidden] | .//comment()"
)
_CANONICAL = lxml.etree.XPath(
    "//head/link[contains(concat(' ', normalize-space(translate(@rel, 'CANONIL', "
    "'canonil')), ' '), ' canonical ')]/@href"
)
_HREFS = lxml.etree.XPath(".//a/@href | self::a/@href")


def compile_selector(selector: str) -> lxml.etree.XPath:
    """An XPath for *selector* (CSS or XPath); ValueError when it is neither."""
    try:
        return _compile(selector)
    except (SelectorError, lxml.etree.XPathSyntaxError) as exc:
        raise ValueError(f"not a CSS selector or an XPath ({exc})") from None


@lru_cache(maxsize=8)
def _compile(selector: str) -> lxml.etree.XPath:
    if selector.lstrip().startswith(("/", "(")):
        return lxml.etree.XPath(selector)
    return lxml.etree.XPath(GenericTranslator().css_to_xpath(selector))


class MainContent(NamedTuple):
    html: str  # of the page's main content
    how: str  # how it was found (:data:`HOW`)
    canonical: str | None  # the page's ``rel=canonical`` href, as written
    links: tuple[str, ...] = ()  # the hrefs of the links in it, as written
    flattened: bool = False  # nested too deep for the tree: flattened, its text kept


def main_content(
    html: str,
    selector: str | None = None,
    measure: Callable[[str], int] | None = None,
    keep_comments: bool = False,
    *,
    extract: bool = True,
) -> MainContent:
    """The page's main content, how it was found, its canonical link and the links
    in it (the site's navigation, sidebars and footer left out, as from its text).
    *measure* says how much text an HTML fragment holds, for the short pages' rescue
    (its characters by default; the caller's measure leaves out what is volatile, so a
    counter's width never moves a page from one way to the other). Comment sections
    are left out unless *keep_comments*. Without *extract*, steps 3 and 4 are left out
    (a page too large for them)."""
    root, flattened = parse_html(html)  # as a browser builds it (content/parse.py)
    links = _CANONICAL(root)
    canonical = str(links[0]).strip() or None if links else None
    found, how, hrefs = _main(root, selector, measure or _chars, not keep_comments, extract)
    return MainContent(found, how, canonical, hrefs, flattened)


def _main(
    root: lxml.etree._Element,
    selector: str | None,
    measure: Callable[[str], int],
    no_comments: bool,
    extract: bool = True,
) -> tuple[str, str, tuple[str, ...]]:
    if selector:
        chosen = [e for e in _compile(selector)(root) if isinstance(e, lxml.etree._Element)]
        if chosen:
            return _serialize(chosen, prune=False), "selector", _hrefs(chosen)
    for how, xpath in (("main", _MAIN), ("article", _ARTICLE)):
        found = xpath(root)
        if len(found) == 1:
            return _serialize(found, prune=True, no_comments=no_comments), how, _hrefs(found)
    if not extract:
        return _whole(root, "cut", no_comments)
    named = _named(root, measure, no_comments)
    if named is not None:
        return named
    extracted = _extracted(root)
    found = measure(extracted) if extracted else 0
    if extracted and found >= RESCUE_CHARS:
        return extracted, "extracted", _hrefs([parse_fragment(extracted)])
    # Little found (a short page): trafilatura would rescue the whole page's text as
    # flat lines, without its headings, and the volatile rules ("## Related posts")
    # would no longer see them. The same rescue here keeps the page's structure.
    rescued = _whole(root, "whole", no_comments)
    if extracted and measure(rescued[0]) <= found:
        return extracted, "extracted", _hrefs([parse_fragment(extracted)])
    return rescued


def _whole(
    root: lxml.etree._Element, how: str, no_comments: bool
) -> tuple[str, str, tuple[str, ...]]:
    """The whole body less the site's header, navigation, sidebars and footer (and
    its comment sections, with *no_comments*)."""
    body = root.find("body")
    whole = body if body is not None else root
    _prune(whole, _TEMPLATE_OF_BODY)
    if no_comments:
        drop_comments(whole)
    return _serialize([whole], prune=False), how, _hrefs([whole])


def _named(
    root: lxml.etree._Element, measure: Callable[[str], int], no_comments: bool
) -> tuple[str, str, tuple[str, ...]] | None:
    """The container the page names as its content, as text, "named" and its links;
    None when it names none, names several alike (a listing's posts: the first is
    not the page), puts it in the site's template, or it holds too little text."""
    catalog = named_catalog()
    for element in catalog.firsts(root):
        # A main or an article is this page's only when it is its one (steps above).
        if element is None or element.tag not in ("div", "section"):
            continue
        if _twins(root, element) or _IN_TEMPLATE(element):
            continue
        element = _around_tabs(element)
        if element is None:
            continue
        kept = deepcopy(element)  # a miss leaves the page whole for the next steps
        catalog.prune(kept, catalog.discard, with_backup=True)  # with trafilatura's guard
        text = _serialize([kept], prune=True, no_comments=no_comments)
        if measure(text) >= RESCUE_CHARS:
            return text, "named", _hrefs([kept])
    return None


def _around_tabs(element: lxml.etree._Element) -> lxml.etree._Element | None:
    """*element*, or when it is (or is inside) a tab panel, the smallest element
    around the panel holding the page's title (an ``<h1>`` outside the site's
    template): a product's title, price, summary and every tab, not its description
    alone (on which no price edit is ever seen). None when no such element is
    found under the body."""
    panels = _TAB_PANEL(element)
    if not panels:
        return element
    for around in panels[0].iterancestors():
        if around.tag in ("body", "html"):
            return None
        if any(not _IN_TEMPLATE(title) for title in around.iter("h1")):
            return around
    return None


def _twins(root: lxml.etree._Element, element: lxml.etree._Element) -> bool:
    """Whether another element of the page has *element*'s tag, class and id."""
    name = (element.get("class"), element.get("id"))
    return any(
        other is not element and (other.get("class"), other.get("id")) == name
        for other in root.iter(element.tag)
    )


def _hrefs(elements: list[lxml.etree._Element]) -> tuple[str, ...]:
    """The links' hrefs in *elements* (pruned already, by ``_serialize``)."""
    return tuple(str(href).strip() for element in elements for href in _HREFS(element))


def _chars(fragment: str) -> int:
    return len("".join(parse_fragment(fragment).text_content().split()))


def _prune(element: lxml.etree._Element, template: lxml.etree.XPath) -> None:
    for hidden in _INVISIBLE(element):
        hidden.drop_tree()
    for part in template(element):
        if part.getparent() is not None:
            part.drop_tree()


def _serialize(
    elements: list[lxml.etree._Element], *, prune: bool, no_comments: bool = False
) -> str:
    parts = []
    for element in elements:
        _prune(element, _TEMPLATE_INSIDE if prune else _NOTHING)
        if no_comments:
            drop_comments(element)
        parts.append(lxml.html.tostring(element, encoding="unicode"))
    return "\n".join(parts)


def _extracted(root: lxml.etree._Element) -> str | None:
    """trafilatura's extraction of the page, as its ``extract`` gives it, less the work
    ``extract`` adds that we never read (a Simhash of the text, a third of its time).
    It reads a copy of our tree (it prunes the tree it is given), not the HTML: its
    own parse would be libxml2's, not a browser's."""
    from trafilatura import bare_extraction

    options, returnstring = _trafilatura()
    page = deepcopy(root)
    if returnstring is None:  # a trafilatura without the step: its extract() whole
        import trafilatura

        return trafilatura.extract(page, options=options)
    document = bare_extraction(page, options=options, as_dict=False)
    return returnstring(document, options) if document is not None else None


@lru_cache(maxsize=1)
def _trafilatura() -> tuple[Any, Callable[[Any, Any], str] | None]:
    """trafilatura's options, and its step from an extraction to the output format
    (``tests/content/test_main_content.py`` checks the two give ``extract``'s own)."""
    from trafilatura.settings import Extractor, use_config

    config = use_config()
    config.set("DEFAULT", "MIN_EXTRACTED_SIZE", "0")  # the rescue is ours (_main)
    options = Extractor(
        config=config,  # its structure, never its flat-text rescue
        output_format="html",
        tables=True,
        formatting=True,
        links=True,
        images=False,
        comments=False,
        recall=True,  # a paragraph missed is an edit missed
        dedup=False,  # its cache spans pages: the same page must give the same text
    )
    try:
        from trafilatura.core import determine_returnstring
    except ImportError:
        return options, None
    return options, determine_returnstring
