"""The one door from a fetched body to the text that is fingerprinted, kept and
delivered (the item's ``markdown``), for direct fetches and Geonode alike.

HTML becomes the markdown of its main content (``content/main.py``), or of the
whole page with ``INCRECRAWL_MAIN_CONTENT = False``; text (markdown from the API,
plain text, JSON) is taken as it is; bytes (PDF, images) are fingerprinted as
bytes. Work is bounded: bodies over ``INCRECRAWL_MAX_PAGE_BYTES`` are refused, pages
over ``INCRECRAWL_CONTENT_MAX_BYTES`` are read in linear time (their main element,
else their whole body less the template: no extraction, "cut"), and callers run this
off the reactor's thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import partial
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, NamedTuple

import lxml.etree
import lxml.html

from increcrawl_scrapy import stats
from increcrawl_scrapy.content.fingerprint import PatternTimeout, stable_text
from increcrawl_scrapy.content.kinds import Kind, kind_of
from increcrawl_scrapy.content.main import compile_selector, main_content
from increcrawl_scrapy.content.markdown import html_to_markdown
from increcrawl_scrapy.content.parse import parse_html
from increcrawl_scrapy.content.scheme_samples import samples_digest

if TYPE_CHECKING:
    from increcrawl_scrapy.config import IncrecrawlConfig

#: Moves whenever what a page's text is changes (v1: the whole page's markdown; v2:
#: its main content; v3: a short page's rescue keeps its headings; v4: an add-on
#: page's fingerprint covers only the links of its main content, not its template's;
#: v5: a container the page names as its content is taken whole, as a <main> is;
#: v6: HTML read as browsers build their DOM (content/parse.py, not libxml2's parser),
#: an <aside> with a doc-* role, a footnote, is the page's own, comment sections are
#: left out and a named tab panel is widened to the page's title).
SCHEME_VERSION = 6
DEFAULT_MAX_PAGE_BYTES = 10 * 1024 * 1024
#: trafilatura's extraction of a plain 1 MB table takes about 6 s (and 20 s for 3 MB,
#: over four minutes and 1.9 GB for 10 MB: it grows faster than the page).
DEFAULT_CONTENT_MAX_BYTES = 1024 * 1024


class UnusablePage(ValueError):
    """A body whose text cannot be taken: a site failure that backs off, the
    page's row kept as it was (never a change, never a crash)."""

    stat = ""  # the stats key counting these (stats.py)
    kind = "unusable"  # what failed, as a run's checks count it (state/history.py)


class PageTooLarge(UnusablePage):
    """A body over the page size limit."""

    stat = stats.TOO_LARGE
    kind = "too large"


class ContentFailed(UnusablePage):
    """A library failed on this page as its text was taken (a converter refusing its
    markup, a parser's bug, or one of ours): a site failure said with where it failed
    (*trace*: the traceback, as text, for it may come from a worker process) and
    counted, not a spider error that left the page in none of a run's counts."""

    stat = stats.CONTENT_FAILED
    kind = "content failed"

    def __init__(self, message: str, trace: str = "", cause: str = "") -> None:
        super().__init__(message, trace, cause)  # all three: it is pickled from a worker
        self.trace = trace
        self.cause = cause  # the library's exception's name: a log's traceback once each

    def __str__(self) -> str:
        return str(self.args[0])


class EmptyDocument(UnusablePage):
    """HTML with no document at all (an empty or comment-only body): a truncated
    answer or a server mid-deploy far more often than a page's real content."""

    stat = stats.EMPTY_PAGES
    kind = "empty"


@dataclass(frozen=True)
class ContentOptions:
    main_only: bool = True
    selector: str | None = None
    max_bytes: int = DEFAULT_MAX_PAGE_BYTES
    #: INCRECRAWL_VOLATILE_PATTERNS: a short page's rescue measures its text without
    #: what is volatile (the defaults' too).
    volatile: tuple[str, ...] = ()
    #: INCRECRAWL_CONTENT_MAX_BYTES: past this, no extraction (``main_content``).
    extract_max_bytes: int = DEFAULT_CONTENT_MAX_BYTES
    keep_comments: bool = False  # INCRECRAWL_KEEP_COMMENTS

    @classmethod
    def from_config(cls, config: IncrecrawlConfig) -> ContentOptions:
        """The options of *config*; a selector that is neither CSS nor XPath raises
        ConfigError (at the crawl's start: the spider and the store read them)."""
        from increcrawl_scrapy.config import ConfigError

        if config.content_selector:
            try:
                compile_selector(config.content_selector)
            except ValueError as exc:
                raise ConfigError(
                    "INCRECRAWL_CONTENT_SELECTOR", config.content_selector, str(exc)
                ) from None
        return cls(
            config.main_content,
            config.content_selector,
            config.max_page_bytes,
            tuple(config.volatile_patterns),
            config.content_max_bytes,
            config.keep_comments,
        )

    def scheme(self) -> str:
        """What decides a page's text: stored with the state, so that a change of it
        (a setting, the parser's version, a converter that writes the text otherwise)
        takes new baselines. The markdown converter is named by its samples' text, not
        its version: its upgrades that change no text re-read nothing
        (``content/scheme_samples.py``); trafilatura's whole version is named."""
        return (
            f"v{SCHEME_VERSION};main={int(self.main_only)};selector={self.selector or ''};"
            f"comments={int(self.keep_comments)};resiliparse={_version('resiliparse')};"
            f"trafilatura={_version('trafilatura', whole=True)};"
            f"markdown={samples_digest(html_to_markdown)}"
        )

    def schemes(self) -> tuple[str, ...]:
        """Its scheme, then how earlier versions spelt it (``check_content_scheme``)."""
        return self.scheme(), self.versions_scheme()

    def versions_scheme(self) -> str:
        """The scheme as spelt before the samples (the libraries' versions): a state
        that stored it under today's versions was fingerprinted as today's."""
        converters = ("html-to-markdown", "resiliparse", "trafilatura")  # and the parser
        libraries = ",".join(f"{name}={_version(name)}" for name in converters)
        return (
            f"v{SCHEME_VERSION};main={int(self.main_only)};selector={self.selector or ''};"
            f"comments={int(self.keep_comments)};{libraries}"
        )


class PageText(NamedTuple):
    text: str
    how: str  # "bytes", "text", "page", or how the main content was found (main.HOW)
    canonical: str | None = None  # an HTML page's ``rel=canonical`` href
    #: The hrefs of the links in an HTML page's main content, as written (None: not
    #: HTML, or the whole page is its text): the links that are the page's own.
    links: tuple[str, ...] | None = None
    #: Its text as the default rules fingerprint it, when taken already (a page
    #: without ``<main>`` is measured so): not taken twice.
    stable: str | None = None
    #: An HTML page nested too deep for the tree: flattened, every text kept.
    flattened: bool = False


def page_text(
    body: bytes, content_type: str | None, text: str | None, options: ContentOptions
) -> PageText:
    """The text of a page whose raw *body* was served as *content_type*; *text* is
    the body decoded the way Scrapy decodes it (None for a binary response)."""
    if len(body) > options.max_bytes:
        raise PageTooLarge(
            f"too large: {len(body)} bytes, over INCRECRAWL_MAX_PAGE_BYTES ({options.max_bytes})"
        )
    kind = kind_of(content_type, body) if text is not None else Kind.BYTES
    if kind is Kind.BYTES:
        # Not text at all: its bytes still tell whether it changed.
        return PageText(f"binary sha256:{hashlib.sha256(body).hexdigest()}", "bytes")
    assert text is not None
    if kind is Kind.TEXT:
        return PageText(text, "text")
    # A fragment measured -> its markdown, made once, and its text as the default
    # rules fingerprint it (None under a user's rules).
    measured: dict[str, tuple[str, str | None]] = {}
    try:
        found = main_content(
            text,
            options.selector,
            partial(_stable_chars, options.volatile, measured),
            options.keep_comments,
            extract=len(body) <= options.extract_max_bytes,
        )
    except lxml.etree.ParserError as exc:  # "Document is empty"
        raise EmptyDocument(f"no HTML document in its {len(body)} bytes ({exc})") from None
    if not options.main_only:
        # The converter reads the HTML itself, as a browser does, but cuts text nested
        # past about 1,000 levels: a page that deep is converted as flattened here.
        whole = (
            lxml.html.tostring(parse_html(text).root, encoding="unicode")
            if found.flattened
            else text
        )
        return PageText(html_to_markdown(whole), "page", found.canonical, flattened=found.flattened)
    markdown, stable = measured.get(found.html) or (html_to_markdown(found.html), None)
    return PageText(markdown, found.how, found.canonical, found.links, stable, found.flattened)


def _stable_chars(
    patterns: tuple[str, ...], measured: dict[str, tuple[str, str | None]], fragment: str
) -> int:
    """The characters of an HTML fragment's text as it is fingerprinted (a user's
    rule that takes too long on it is left out here: the fingerprint says so); its
    markdown and, under the default rules, that text are kept in *measured* for the
    fragment chosen."""
    markdown = html_to_markdown(fragment)
    try:
        kept = stable_text(markdown, patterns)
    except PatternTimeout:
        kept = stable_text(markdown)
    measured[fragment] = (markdown, None if patterns else kept)
    return len("".join(kept.split()))


def _version(name: str, *, whole: bool = False) -> str:
    """*name*'s installed version: major.minor, or *whole* (trafilatura's patch
    releases change extracted text too: 2.3.1 that of 5 of 409 real pages)."""
    try:
        found = version(name)
    except PackageNotFoundError:
        return "-"
    return found if whole else ".".join(found.split(".")[:2])
