"""What a page's text is: its kind, its main content, bounded work."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest

from increcrawl_scrapy.config import ConfigError, IncrecrawlConfig
from increcrawl_scrapy.content.fingerprint import PatternTimeout, content_fingerprint, stable_text
from increcrawl_scrapy.content.kinds import Kind, kind_of
from increcrawl_scrapy.content.main import main_content
from increcrawl_scrapy.content.page_text import ContentOptions, PageTooLarge, page_text
from increcrawl_scrapy.content.parse import parse_html
from tests.content.growth import MOST, growth

PAGE = """<!doctype html><html><head><title>T</title></head><body>
<header><a href="/">Site</a><nav><a href="/a">A</a><a href="/b">B</a></nav></header>
<div class="wrap"><aside><h3>Recent</h3><a href="/c">C</a></aside>
<main><h1>Own title</h1><p>Own text of the page.</p>
<nav class="pager"><a href="/prev">Previous</a></nav>
<pre><code>x = 1</code></pre><table><tr><td>cell</td></tr></table></main></div>
<footer>(c) 2026</footer></body></html>"""


def test_the_main_element_without_its_navigation_is_the_content() -> None:
    html, how, *_ = main_content(PAGE)
    assert how == "main"
    assert "Own text" in html and "x = 1" in html and "cell" in html
    for template in ("Recent", "Previous", "(c) 2026", ">A<", "Site"):
        assert template not in html


def test_a_footnote_aside_is_the_pages_own_and_a_sidebar_inside_main_is_not() -> None:
    # docutils' HTML5 writer (every Sphinx theme): footnotes are asides with a doc-* role.
    notes = (
        '<aside class="footnote-list"><aside class="footnote" role="doc-footnote">'
        "<p>The footnote's own text.</p></aside></aside>"
        '<aside class="related"><a href="/other">Other post</a></aside>'
    )
    html, how, *_ = main_content(PAGE.replace("</main>", notes + "</main>"))
    assert how == "main" and "The footnote's own text." in html
    assert "Other post" not in html


def test_one_article_when_no_main() -> None:
    page = PAGE.replace("<main>", "<article>").replace("</main>", "</article>")
    html, how, *_ = main_content(page)
    assert how == "article" and "Own text" in html and "Recent" not in html


PARAGRAPHS = "".join(
    f"<p>This is paragraph {i} of the article, with enough words in it to be read "
    "as the text of the page rather than as a menu or a footer line.</p>"
    for i in range(6)
)


def _divs(content: str, paragraphs: str = PARAGRAPHS) -> str:
    return (
        '<html><body><div id="menu"><a href="/a">Home</a> | <a href="/b">About</a></div>'
        f'<div class="sidebar"><a href="/c">Latest post</a></div>{content.format(paragraphs)}'
        '<div id="foot">Copyright 2026</div></body></html>'
    )


def test_a_page_marking_nothing_is_extracted_by_trafilatura() -> None:
    html, how, *_ = main_content(_divs('<div class="c7">{}</div>'))
    assert how == "extracted"
    assert "paragraph 5 of the article" in html
    assert "About" not in html and "Latest post" not in html


@pytest.mark.parametrize(
    "container",
    [
        '<div id="content">{}</div>',
        '<div class="post">{}</div>',
        '<section class="entry-content">{}</section>',
        '<div itemprop="articleBody">{}</div>',
    ],
)
def test_a_container_the_page_names_as_its_content_is_taken_whole(container: str) -> None:
    """Named in trafilatura's catalog, the container is taken as a ``<main>`` is: its
    template parts and the catalog's no-content parts (a share box) left out."""
    share = '<div class="share-buttons"><a href="/s">Share this on Twitter</a></div>'
    html, how, *_ = main_content(_divs(container, PARAGRAPHS + share))
    assert how == "named"
    assert "paragraph 0 of" in html and "paragraph 5 of" in html
    for template in ("Home", "Latest post", "Copyright", "Share this"):
        assert template not in html


def test_a_named_container_gives_the_text_a_main_element_gives() -> None:
    """One text per page whatever the way: a theme that moves its content from a
    named div into a ``<main>`` changes no page's fingerprint."""
    related = "<h2>Related posts</h2><ul><li><a href='/b'>Another post</a></li></ul>"
    named = page_text(
        b"x",
        "text/html",
        _divs('<div id="content">{}</div>', f"<h1>The title</h1>{PARAGRAPHS}{related}"),
        ContentOptions(),
    )
    marked = page_text(
        b"x",
        "text/html",
        _divs("<main>{}</main>", f"<h1>The title</h1>{PARAGRAPHS}{related}"),
        ContentOptions(),
    )
    assert (named.how, marked.how) == ("named", "main")
    assert named.text == marked.text and "\n## Related posts\n" in named.text


_LISTING = _divs('<div class="post">{0}</div><div class="post">{0}</div>')
_IN_ASIDE = _divs('<aside><div id="content">{}</div></aside>')
_SHORT = _divs('<div id="content">{}</div>', "<p>Only a line of text.</p>")


@pytest.mark.parametrize(
    ("page", "why"),
    [
        (
            _LISTING,
            "a listing: the first post is not the page",
        ),
        (_IN_ASIDE, "inside the site's template"),
        (_SHORT, "too little text"),
    ],
)
def test_a_named_container_is_not_taken_when_it_may_not_be_the_page(page: str, why: str) -> None:
    assert main_content(page).how != "named", why


_CATALOG_PAGES = {
    "named twice, and a name's first bearer an article": (
        "<body><article class='post'>a</article><div class='post'>b</div>"
        "<section id='content'><div class='content'>c</div></section></body>"
    ),
    "a <main> before the div named main (the last name names the first <main> too)": (
        "<body><main>m</main><main>n</main><div class='main-col'>d</div></body>"
    ),
    "regexes of the catalog, nested": (
        "<body><div class='x'><section class='entry-content'><div id='story-body'>"
        "<div itemprop='articleBody'>e</div></div></section></div></body>"
    ),
    "a div named main before the first <main>, which bears a name too": (
        "<body><div class='main-col'>d</div><main class='post'>m</main><main>n</main></body>"
    ),
    "nothing named": "<body><div class='c7'><p>f</p></div><section>g</section></body>",
}


@pytest.mark.parametrize("page", _CATALOG_PAGES.values(), ids=list(_CATALOG_PAGES))
def test_the_catalog_read_in_one_pass_finds_what_trafilaturas_xpaths_find(page: str) -> None:
    """The names read in one pass over the candidates (one XPath an element) give,
    for each name, the element its own XPath over the whole page gives first; and a
    name of a shape not known falls back to that XPath."""
    import lxml.html

    from increcrawl_scrapy.content import named_catalog as content_main

    catalog = content_main.named_catalog()
    assert catalog.bits is not None  # trafilatura's names are all of the known shape
    root = lxml.html.document_fromstring(page)
    by_xpath = catalog._replace(bits=None).firsts(root)
    assert catalog.firsts(root) == by_xpath
    assert any(e is not None for e in by_xpath) != (page == _CATALOG_PAGES["nothing named"])
    for shape in (
        "(.//*[self::div][@class='x'])[1] | .//p",  # a union
        ".//p[@class='x'][1]",  # not any element
        "(.//*[@class='x'])[1]",  # elements the candidates leave out (a <p>)
        "(.//*[self::div or self::p][@id])[1]",
        "(.//*[self::div][2])[1]",  # a position: another thing on one element
        "(.//*[self::div][last()])[1]",
    ):
        assert content_main._as_test(shape) is None, shape
    assert content_main._as_test("(.//*[self::div][@class='a]'])[1]|(.//main)[1]") == (
        "self::*[self::div][@class='a]']",
        True,
    )


@pytest.mark.parametrize("shape", ["divs", "short", "empty", "table"])
def test_the_extraction_is_trafilaturas_own(shape: str) -> None:
    """The extraction skips ``extract``'s Simhash, not a step of its text: the same
    output as ``trafilatura.extract`` with the same options (a trafilatura upgrade
    that moves the step fails here, not in users' fingerprints)."""
    import trafilatura

    from increcrawl_scrapy.content.main import _extracted, _trafilatura

    words = " ".join(f"word{i}" for i in range(40))
    bodies = {
        "divs": "".join(f"<div><h2>Part {i}</h2><p>{words}</p></div>" for i in range(5)),
        "short": "<div><p>Only a line.</p></div>",
        "empty": "<div></div>",
        "table": f"<div><table><tr><td>{words}</td><td>cell</td></tr></table><p>{words}</p></div>",
    }
    page = (
        '<html><head><title>T</title></head><body><div id="menu"><a href="/a">Home</a></div>'
        f'{bodies[shape]}<div id="foot">Copyright 2026</div></body></html>'
    )
    options, returnstring = _trafilatura()
    assert returnstring is not None  # the cheaper way is the one taken here
    # Both read the page as parsed here (a browser's DOM), each its own copy.
    assert _extracted(parse_html(page).root) == trafilatura.extract(
        parse_html(page).root, options=options
    )


def test_the_selector_wins_css_or_xpath() -> None:
    page = PAGE.replace('<div class="wrap">', '<div class="wrap"><div id="own">Chosen</div>')
    assert main_content(page, "#own")[:2] == ('<div id="own">Chosen</div>', "selector")
    assert main_content(page, "//div[@id='own']")[1] == "selector"
    assert main_content(page, "#missing")[1] == "main"  # not on this page: automatic


def test_a_bad_selector_is_refused_at_start() -> None:
    config = IncrecrawlConfig.from_settings({"INCRECRAWL_CONTENT_SELECTOR": "div[["})
    with pytest.raises(ConfigError, match="INCRECRAWL_CONTENT_SELECTOR"):
        ContentOptions.from_config(config)


def test_whole_page_when_asked() -> None:
    whole = page_text(PAGE.encode(), "text/html", PAGE, ContentOptions(main_only=False))
    own = page_text(PAGE.encode(), "text/html", PAGE, ContentOptions())
    assert "Recent" in whole.text and "Recent" not in own.text
    assert (whole.how, own.how) == ("page", "main")


@pytest.mark.parametrize(
    ("content_type", "body", "kind"),
    [
        ("text/html", b"%PDF-1.7\n...", Kind.BYTES),  # the body's signature wins
        ("application/pdf", b"%PDF-1.4", Kind.BYTES),
        ("image/png", b"\x89PNG\r\n\x1a\n....", Kind.BYTES),
        ("text/html; charset=utf-8", b"<p>x</p>", Kind.HTML),
        (None, b"<!DOCTYPE html><html>", Kind.HTML),
        ("application/json", b'{"a": 1}', Kind.TEXT),
        ("text/plain", b"plain", Kind.TEXT),
        ("text/markdown; charset=utf-8", b"# md", Kind.TEXT),
        ("application/octet-stream", b"\x01\x02", Kind.BYTES),
        (None, b"\x00\x01binary", Kind.BYTES),
    ],
)
def test_kinds(content_type: str | None, body: bytes, kind: Kind) -> None:
    assert kind_of(content_type, body) is kind


def test_bytes_are_fingerprinted_as_bytes_never_converted() -> None:
    pdf = b"%PDF-1.7\n<html><body>not html</body></html>"
    found = page_text(pdf, "text/html", pdf.decode(), ContentOptions())
    assert found.how == "bytes" and found.text.startswith("binary sha256:")
    other = page_text(pdf + b"x", "text/html", None, ContentOptions())
    assert other.text != found.text


def test_a_body_over_the_limit_is_refused() -> None:
    with pytest.raises(PageTooLarge):
        page_text(b"x" * 2048, "text/plain", "x" * 2048, ContentOptions(max_bytes=1024))


#: Text with every word that lets a default rule run, after 1 MB of each shape.
_TRIGGERS = " value content csrf nonce session sid rendered generated ? view read visit hit related"
_SHAPES = [
    "a-",
    "name='csrf' ",
    "name='csrf' value=",
    "csrf=",
    "sessid=",
    "csrf-",
    "x-nonce: ",
    "1,",
    "1 views\n",
    "#",
    " ",
    "\n",
    "## related posts\n",
    "rendered at 2024-",
    "generated on 2024-05-01 1",
    ".css?v",
    "=",
    "'",
]


#: The growth check's smaller text: above the rules' longest bounded repetition (4,096
#: characters), so that a bounded rule grows as the linear rule it is.
_SIZE = 16_000


def _shaped(shape: str) -> Callable[[int], str]:
    """Text of *shape* repeated, then every word that lets a default rule run."""
    return lambda size: (shape * (size // len(shape)))[: size - len(_TRIGGERS)] + _TRIGGERS


@pytest.mark.parametrize("shape", _SHAPES)
def test_every_default_rule_is_linear(shape: str) -> None:
    # A rule that backtracks over a run of its shape grows with the square of it.
    assert growth(stable_text, _shaped(shape), _SIZE) < MOST


def test_the_growth_check_sees_a_quadratic_rule() -> None:
    # An unbounded repetition tried again from every position of a run of "a-": the
    # check must fail on it (small texts: a quadratic rule is slow on long ones).
    quadratic = re.compile(r"(?:a-)*\d")
    assert growth(quadratic.search, _shaped("a-"), 1_000) > MOST


def test_a_users_rule_that_backtracks_is_stopped() -> None:
    backtracking = r"(a|aa)+$"  # exponential on a run of a's that does not end the line
    started = time.perf_counter()
    with pytest.raises(PatternTimeout, match="backtracks"):
        content_fingerprint("a" * 60 + "!", (backtracking,))
    # A bound on a hang, not a speed: unstopped, the rule would run for centuries.
    assert time.perf_counter() - started < 30


def test_users_rules_still_apply() -> None:
    one = content_fingerprint("Hello\nVisitors today: 12\n", (r"^Visitors today: \d+$",))
    two = content_fingerprint("Hello\nVisitors today: 99\n", (r"^Visitors today: \d+$",))
    assert one == two


def test_the_canonical_link_is_read_from_the_head() -> None:
    page = PAGE.replace("<title>", '<link rel="Canonical" href="/a/">' + "<title>")
    assert main_content(page).canonical == "/a/"
    assert main_content(PAGE).canonical is None


def test_markdown_is_the_librarys_own_conversion() -> None:
    # The options are made into the converter's once (content/markdown.py): the text,
    # and so every stored fingerprint, must be what the library's convert() gives.
    from html_to_markdown import convert

    from increcrawl_scrapy.content.markdown import _OPTIONS, html_to_markdown

    pages = [
        "<main><h1>Title</h1><p>Some <b>bold</b> and <i>italic</i>, a <a href='/x'>link</a>."
        "</p><ul><li>one</li><li>two<ul><li>deep</li></ul></li></ul></main>",
        "<html><head><title>T</title><meta name='d' content='x'></head><body><nav>menu</nav>"
        "<h2>Related posts</h2><ol><li>a_b *c*</li></ol><pre><code>x = 1</code></pre>"
        "<table><tr><th>h</th></tr><tr><td>d</td></tr></table><blockquote>q</blockquote>"
        "<img src='i.png' alt='pic'><form><input name='csrf_token' value='abc123456'></form>"
        "</body></html>",
        "<p>&nbsp;&amp; entities &lt;kept&gt;</p><script>var t = 1;</script><hr><br>",
        "",
    ]
    for html in pages:
        assert html_to_markdown(html) == (convert(html, _OPTIONS).content or "").strip() + "\n"


def test_a_soft_404_verdict_an_older_version_kept_still_judges() -> None:
    # Kept as a fingerprint of the "not found" text less its URL (0.2): a run after
    # the upgrade whose probe gets no answer still tells soft 404s.
    from increcrawl_scrapy.content.soft404 import NotFound

    text = "Not found: /gone.html is not here"
    found = NotFound.loads(content_fingerprint(text.replace("/gone.html", "")))
    assert found is not None and found.answers(text, "http://s.test/gone.html")
    assert not found.answers("A page of its own", "http://s.test/page.html")
    learned = NotFound("Not found: /x-not-found is not here", "http://s.test/x-not-found")
    again = NotFound.loads(learned.dumps())
    assert again == learned
    assert again.answers("Not found: /other.html is not here", "http://s.test/other.html")
    assert NotFound.loads("") is None and NotFound.loads("not json") is None


@pytest.mark.parametrize(
    "page",
    [
        PAGE,  # its <main>: never measured
        _divs('<div class="post">{}</div>'),  # named
        _divs('<div class="c7">{}</div>'),  # trafilatura's extraction
        _divs('<div class="c7"><p>A short note.</p></div>', ""),  # the whole body
    ],
)
def test_the_text_measured_is_fingerprinted_once(
    page: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page without ``<main>`` is measured by its text as fingerprinted: that text
    is the fingerprint's, not taken a second time (a percent of such a first run)."""
    from increcrawl_scrapy.content import fingerprint
    from increcrawl_scrapy.content import page_text as page_text_module
    from increcrawl_scrapy.crawl.response_text import with_print

    calls: list[str] = []

    def counted(markdown: str, extra_patterns: tuple[str, ...] = ()) -> str:
        calls.append(markdown)
        return stable_text(markdown, extra_patterns)

    monkeypatch.setattr(fingerprint, "stable_text", counted)
    monkeypatch.setattr(page_text_module, "stable_text", counted)
    options = ContentOptions()
    found, taken = with_print(True, page_text, page.encode(), "text/html", page, options)
    assert calls.count(found.text) == 1, found.how
    assert taken == content_fingerprint(found.text)  # the same fingerprint

    # Under a user's rules the measure is theirs: the default rules' text is taken apart.
    calls.clear()
    options = ContentOptions(volatile=(r"never-in-these-pages",))
    found, taken = with_print(True, page_text, page.encode(), "text/html", page, options)
    assert taken == content_fingerprint(found.text)
    assert found.stable is None


_OWN = "<h1>Roses</h1><p>" + "The post's own text about roses and frost. " * 8 + "</p>"


@pytest.mark.parametrize(
    "comments",
    [
        # Classic themes (Twenty Twenty-One's comments.php), Disqus, older themes.
        '<div id="comments" class="comments-area default-max-width show-avatars">'
        '<h2 class="comments-title">2 comments</h2><ol class="comment-list">'
        '<li id="comment-1" class="comment"><p>Reader said this.</p></li></ol></div>',
        '<div id="disqus_thread"><p>Reader said this.</p></div>',
        '<ol class="commentlist"><li class="comment"><p>Reader said this.</p></li></ol>',
        '<div id="respond" class="comment-respond"><h3>Leave a Reply</h3>'
        "<p>Reader said this.</p></div>",
    ],
)
@pytest.mark.parametrize("container", ["<main>{}</main>", "<article>{}</article>", "{}"])
def test_comment_sections_are_left_out_unless_kept(comments: str, container: str) -> None:
    page = f"<html><body>{container.format(_OWN + comments)}</body></html>"
    left = main_content(page)
    assert "own text" in left.html and "Reader said" not in left.html, left.how
    kept = main_content(page, keep_comments=True)
    # trafilatura's extraction (a page marking nothing) sets comments apart in any case.
    assert ("Reader said" in kept.html) == (kept.how != "extracted"), kept.how


def test_an_element_holding_the_title_is_never_taken_for_comments() -> None:
    page = f'<html><body><main><div class="post has-comments">{_OWN}</div></main></body></html>'
    assert "own text" in main_content(page).html


def test_a_named_tab_panel_widens_to_the_page_title_else_is_passed_over() -> None:
    tabs = (
        '<div class="tabs"><div class="entry-content" role="tabpanel">'
        + "<p>Only the description tab. </p>" * 20
        + "</div></div>"
    )
    page = f'<html><body><div id="product-1"><h1>Cap</h1><p class="price">$16</p>{tabs}</div>'
    found = main_content(page + "</body></html>")
    assert found.how == "named" and "$16" in found.html and "Cap" in found.html
    # No title around it: the tab is no page, the next ways are tried.
    alone = main_content(f"<html><body>{tabs}</body></html>")
    assert alone.how != "named"
