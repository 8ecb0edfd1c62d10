"""A page's own content on real markup, served by nginx and crawled through Scrapy:
a WooCommerce product page without <main> (its price is the page's, not only its
description tab) and a WordPress post whose default theme puts its comments inside
<main> (a new comment is no edit of the post, unless INCRECRAWL_KEEP_COMMENTS).

The markup (``markup/``) is WooCommerce's and WordPress's own, as their templates
and block renderers write it (each file says where it comes from).
"""

from __future__ import annotations

from pathlib import Path
from string import Template

import pytest
import pytest_twisted

from tests.conftest import Clock
from tests.crawling import crawl_settings, run_crawl
from tests.servers import nginx, nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]

MARKUP = Path(__file__).parent / "markup"
LATER = 200 * 86400.0  # every page due again
UNTRUSTED = {"INCRECRAWL_LASTMOD_MIN_EVIDENCE": 100_000}


def _markup(name: str) -> Template:
    return Template((MARKUP / name).read_text())


class Site:
    """Pages in a folder nginx serves (``/<slug>/``), with their sitemap."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = ""
        self.pages: dict[str, str] = {}

    def put(self, slug: str, html: str) -> None:
        self.pages[slug] = html
        (self.root / slug).mkdir(parents=True, exist_ok=True)
        (self.root / slug / "index.html").write_text(html)
        entries = "".join(f"<url><loc>{self.base}/{s}/</loc></url>" for s in sorted(self.pages))
        (self.root / "sitemap.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>'
        )

    def url(self, slug: str) -> str:
        return f"{self.base}/{slug}/"


@pytest.fixture
def site(tmp_path: Path):
    made = Site(tmp_path / "www")
    made.root.mkdir()
    (made.root / "sitemap.xml").write_text("")
    with nginx(made.root, tmp_path / "nginx") as (url, _access):
        made.base = url.rstrip("/")
        yield made


async def _crawl(site: Site, settings: dict) -> object:
    return await run_crawl(settings, sitemap_url=f"{site.base}/sitemap.xml")


# -- a WooCommerce product page ------------------------------------------------------

PRODUCTS = {
    "hoodie": ("Hoodie", "45.00", "A warm hoodie, fleece lined."),
    "beanie": ("Beanie", "18.00", "A knitted beanie for cold mornings."),
    "cap": ("Cap", "16.00", "A cotton cap with an adjustable strap."),
}


def product(slug: str, price: str | None = None, stock: int = 12) -> str:
    title, listed, summary = PRODUCTS[slug]
    other = next(s for s in PRODUCTS if s != slug)
    # WooCommerce's own sample products' description (its sample_products.csv).
    description = (
        f"<p>{title}. Pellentesque habitant morbi tristique senectus et netus et malesuada "
        "fames ac turpis egestas. Vestibulum tortor quam, feugiat vitae, ultricies eget, "
        "tempor sit amet, ante. Donec eu libero sit amet quam egestas semper. Aenean "
        "ultricies mi vitae est. Mauris placerat eleifend leo.</p>"
    )
    return _markup("woocommerce_product.html").substitute(
        id=100 + sorted(PRODUCTS).index(slug),
        slug=slug,
        title=title,
        price=price or listed,
        summary=summary,
        stock=stock,
        description=description,
        other=200,
        other_slug=other,
        other_title=PRODUCTS[other][0],
        other_price=PRODUCTS[other][1],
    )


@pytest_twisted.ensureDeferred
async def test_a_price_edit_on_a_woocommerce_product_page_is_a_change(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in PRODUCTS:
        site.put(slug, product(slug))
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in PRODUCTS}
    hoodie = next(i for i in first.items if i["url"] == site.url("hoodie"))
    # The product's whole main part: its title, price, summary and tabs.
    for part in ("Hoodie", "45.00", "fleece lined", "Pellentesque", "Weight"):
        assert part in hoodie["markdown"], part
    assert first.stats["increcrawl/content/named"] == len(PRODUCTS)

    site.put("hoodie", product("hoodie", price="39.00"))
    clock.advance(LATER)
    second = await _crawl(site, settings)
    assert second.changes("changed") == {site.url("hoodie")}
    assert second.stats["increcrawl/unchanged"] == len(PRODUCTS) - 1


# -- a WordPress post with comments ---------------------------------------------------

POSTS = {"hello-world": 1, "second-post": 2, "third-post": 3}
PARAGRAPHS = (
    "Welcome to WordPress. This is the post's own text, which its author may edit.",
    "A second paragraph, long enough for the page to read as an article of its own.",
    "And a third, about the weather in November and the first frost on the roses.",
)


def post(slug: str, comments: int = 0, edited: bool = False) -> str:
    title = slug.replace("-", " ").title()
    body = "\n\n".join(f"<p>{text}</p>" for text in PARAGRAPHS)
    if edited:
        body += "\n\n<p>Update: the roses survived the frost.</p>"
    names = ("A WordPress Commenter", "Maria", "Jun", "Ola", "Pierre")
    said = "".join(
        _markup("comment.html").substitute(
            id=n + 1,
            post=POSTS[slug],
            slug=slug,
            author=names[n % len(names)],
            text=f"Comment {n + 1}: thanks for this post, it helped me with my own roses.",
        )
        for n in range(comments)
    )
    heading = (
        f"{comments} responses to &#8220;{title}&#8221;"
        if comments != 1
        else f"One response to &#8220;{title}&#8221;"
    )
    return _markup("wordpress_post.html").substitute(
        id=POSTS[slug], slug=slug, title=title, body=body, comments_title=heading, comments=said
    )


@pytest_twisted.ensureDeferred
async def test_a_new_comment_is_no_change_of_a_wordpress_post(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in POSTS:
        site.put(slug, post(slug, comments=2))
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await _crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in POSTS}
    hello = next(i for i in first.items if i["url"] == site.url("hello-world"))
    assert "Welcome to WordPress" in hello["markdown"]
    assert "Comment 1" not in hello["markdown"] and "Leave a Reply" not in hello["markdown"]

    # A comment on one post, an edit of another.
    site.put("hello-world", post("hello-world", comments=3))
    site.put("second-post", post("second-post", comments=2, edited=True))
    clock.advance(LATER)
    second = await _crawl(site, settings)
    assert second.changes("changed") == {site.url("second-post")}


@pytest_twisted.ensureDeferred
async def test_comments_kept_when_asked_are_a_change(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in POSTS:
        site.put(slug, post(slug, comments=2))
    settings = crawl_settings(
        str(tmp_path / "s.sqlite"), clock, INCRECRAWL_KEEP_COMMENTS=True, **UNTRUSTED
    )
    first = await _crawl(site, settings)
    hello = next(i for i in first.items if i["url"] == site.url("hello-world"))
    assert "Comment 2" in hello["markdown"]

    site.put("hello-world", post("hello-world", comments=3))
    clock.advance(LATER)
    second = await _crawl(site, settings)
    assert second.changes("changed") == {site.url("hello-world")}
