"""A page's own content on real markup, served by nginx and crawled through Scrapy:
a WooCommerce product page without <main> (its price is the page's, not only its
description tab) and a WordPress post whose default theme puts its comments inside
<main> (a new comment is no edit of the post, unless INCRECRAWL_KEEP_COMMENTS).

The markup (``markup/``) is WooCommerce's own, as its templates write it, and pages
WordPress itself rendered (``markup/wordpress/README.txt``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_twisted

from tests.conftest import Clock
from tests.content.served_pages import LATER, POSTS, UNTRUSTED, Site, crawl, markup, rendered, site
from tests.crawling import crawl_settings
from tests.servers import nginx_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]
__all__ = ["site"]  # the fixture

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
    return markup("woocommerce_product.html").substitute(
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
    first = await crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in PRODUCTS}
    hoodie = next(i for i in first.items if i["url"] == site.url("hoodie"))
    # The product's whole main part: its title, price, summary and tabs.
    for part in ("Hoodie", "45.00", "fleece lined", "Pellentesque", "Weight"):
        assert part in hoodie["markdown"], part
    assert first.stats["increcrawl/content/named"] == len(PRODUCTS)

    site.put("hoodie", product("hoodie", price="39.00"))
    clock.advance(LATER)
    second = await crawl(site, settings)
    assert second.changes("changed") == {site.url("hoodie")}
    assert second.stats["increcrawl/unchanged"] == len(PRODUCTS) - 1


# -- a WordPress post with comments ---------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_new_comment_is_no_change_of_a_wordpress_post(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in POSTS:
        site.put(slug, rendered(f"{slug}.0"))
    settings = crawl_settings(str(tmp_path / "s.sqlite"), clock, **UNTRUSTED)
    first = await crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in POSTS}
    hello = next(i for i in first.items if i["url"] == site.url("hello-world"))
    assert "Welcome to WordPress" in hello["markdown"]
    for comments in ("responses to", "Thanks for this post", "Leave a Reply"):
        assert comments not in hello["markdown"], comments
    assert first.stats["increcrawl/content/main"] == len(POSTS)

    # A comment on one post, an edit of another.
    site.put("hello-world", rendered("hello-world.1"))
    site.put("second-post", rendered("second-post.1"))
    clock.advance(LATER)
    second = await crawl(site, settings)
    assert second.changes("changed") == {site.url("second-post")}


@pytest_twisted.ensureDeferred
async def test_comments_kept_when_asked_are_a_change(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in POSTS:
        site.put(slug, rendered(f"{slug}.0"))
    settings = crawl_settings(
        str(tmp_path / "s.sqlite"), clock, INCRECRAWL_KEEP_COMMENTS=True, **UNTRUSTED
    )
    first = await crawl(site, settings)
    hello = next(i for i in first.items if i["url"] == site.url("hello-world"))
    assert "Thanks for this post" in hello["markdown"]

    site.put("hello-world", rendered("hello-world.1"))
    clock.advance(LATER)
    second = await crawl(site, settings)
    assert second.changes("changed") == {site.url("hello-world")}
