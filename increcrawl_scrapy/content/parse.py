"""A page's HTML read as browsers build their DOM, into the lxml tree the rest reads.

libxml2's HTML parser (lxml's) is not HTML5's: a stray ``</li>`` closes a list item
further up (on MkDocs Material with Starlette's overrides the navigation lands in
``<main>``), a NUL byte becomes U+FFFD where browsers drop it, and elements nested
deeper than 255 are cut with their text. Lexbor (through Resiliparse) builds the
DOM as the HTML5 standard says; its serialization, whose every element is closed
explicitly, is read back by libxml2 unchanged, into lxml's tree (XPath, trafilatura).
Chosen by measurement against Chromium's DOM (``benchmarks/html_parsers.py``).

A document nested deeper than libxml2 reads (255) is copied from Lexbor's DOM node
by node instead, flattened past 512 as Chromium flattens it: deeper elements become
children of the one at depth 512, every text kept (the caller warns and counts it).
Deeper, the markdown converter would drop text silently (at about 1,000).
"""

from __future__ import annotations

import contextlib
import re
import threading
from typing import Any, NamedTuple

import lxml.etree
import lxml.html
from resiliparse.parse.html import HTMLTree, NodeType

#: Serialized HTML5 is read back by a parser of each thread's own: every element is
#: closed, and deeper than it reads, its error log (its last run's) says so.
_PER_THREAD = threading.local()
#: A fragment of a tree of ours: at most FLATTEN_DEPTH deep.
_FRAGMENT = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, huge_tree=True)
#: Chromium's limit (``kMaximumHTMLParserDOMTreeDepth``): deeper elements are flattened.
FLATTEN_DEPTH = 512
#: What XML (so lxml) cannot hold in text: HTML5 keeps these control characters.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


_COMMENTS = re.compile(rb"<!--.*?(?:-->|$)", re.DOTALL)


class Parsed(NamedTuple):
    root: lxml.html.HtmlElement
    flattened: bool  # nested deeper than FLATTEN_DEPTH: elements moved up, text kept


def parse_html(html: str | bytes) -> Parsed:
    """The document *html* as a browser builds it (comments left out); raises
    lxml.etree.ParserError when it holds no document at all."""
    body = html if isinstance(html, bytes) else html.encode("utf-8", "replace")
    # Resiliparse's tree must be dropped on the thread that made it: never held by a
    # traceback that leaves this function (an exception handled on another thread).
    tree = HTMLTree.parse_from_bytes(body, "utf-8")
    try:
        serialized = str(tree).encode("utf-8", "replace")
        parser = getattr(_PER_THREAD, "parser", None)
        if parser is None:
            parser = _PER_THREAD.parser = lxml.html.HTMLParser(
                encoding="utf-8", remove_comments=True
            )
        root = lxml.html.document_fromstring(serialized, parser=parser)
        if any(error.type_name == "ERR_RESOURCE_LIMIT" for error in parser.error_log):
            return _copied(tree)
    finally:
        del tree
    if _nothing_in(root) and not _COMMENTS.sub(b"", body).strip():
        # An HTML5 parser makes a document of anything; an empty or comment-only body
        # is none (libxml2 said so: page_text's EmptyDocument).
        raise lxml.etree.ParserError("Document is empty")
    return Parsed(root, False)


def _nothing_in(root: lxml.etree._Element) -> bool:
    """Whether *root* is the bare document a parser makes of nothing."""
    return all(not len(part) and not (part.text or "").strip() for part in root)


def parse_fragment(html: str) -> lxml.html.HtmlElement:
    """An HTML fragment this package serialized (well formed), however deep."""
    return lxml.html.fromstring(html, parser=_FRAGMENT)


def _copied(tree: HTMLTree) -> Parsed:
    """Lexbor's DOM copied node by node (a rare page: Python's pace), flattened past
    :data:`FLATTEN_DEPTH`; names XML cannot hold are left out, their children kept."""
    flattened = False
    make = lxml.html.html_parser.makeelement
    root = make("html")
    document = tree.document
    nodes = document.child_nodes if document is not None else []
    stack: list[tuple[Any, lxml.etree._Element, int]] = [
        (child, root, 1) for child in reversed(nodes)
    ]
    # Each parent's last child, kept: lxml's len() and [-1] walk the children, and a
    # flattened parent has all of a deep page's (the copy would be quadratic).
    last: dict[lxml.etree._Element, lxml.etree._Element] = {}
    while stack:
        node, parent, depth = stack.pop()
        if node.type == NodeType.TEXT:
            _append_text(parent, last.get(parent), _NOT_XML.sub("", node.text))
            continue
        if node.type != NodeType.ELEMENT:
            continue
        if node.tag == "html":
            element, depth = root, 0
        else:
            try:
                element = make(node.tag)
            except ValueError:  # a name XML cannot hold: its children go to its parent
                element = None
            if element is not None:
                for name, value in ((a, node.getattr(a)) for a in node.attrs):
                    with contextlib.suppress(ValueError):  # a name XML cannot hold (``@click``)
                        element.set(name, _NOT_XML.sub("", value or ""))
                parent.append(element)
                last[parent] = element
        inside = parent if element is None else element
        if depth >= FLATTEN_DEPTH and element is not None:
            inside, flattened = parent, True
        stack.extend((child, inside, depth + 1) for child in reversed(node.child_nodes))
    return Parsed(root, flattened)


def _append_text(parent: lxml.etree._Element, last: lxml.etree._Element | None, text: str) -> None:
    if last is not None:
        last.tail = (last.tail or "") + text
    else:
        parent.text = (parent.text or "") + text
