"""A list of the site's links inside the page's content (WordPress's Page List block
placed in each post, outside any <nav>) changes on every page at once when a page is
added to the site: the crawl says so in one line and points at
INCRECRAWL_CONTENT_SELECTOR, and neither it nor ``noisy`` proposes a volatile pattern
for one link (the next page added would change every page again)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest_twisted

from increcrawl_scrapy.testing.process import run_process
from tests.conftest import Clock
from tests.content.test_shops_and_comments import LATER, POSTS, UNTRUSTED, Site, post, site
from tests.crawling import crawl_settings

__all__ = ["site"]  # the fixture


def page_list(titles: list[str]) -> str:
    """WordPress's Page List block, as it renders outside a Navigation block."""
    items = "".join(
        '<li class="wp-block-pages-list__item"><a class="wp-block-pages-list__item__link" '
        f'href="/{title.lower().replace(" ", "-")}/">{title}</a></li>'
        for title in titles
    )
    return f'<ul class="wp-block-page-list">{items}</ul>'


def with_pages(slug: str, titles: list[str]) -> str:
    """A post whose content ends with the site's page list."""
    page = post(slug, comments=1)
    closing = '\n</div>\n\t\t\t<div class="wp-block-template-part">'
    return page.replace(closing, "\n" + page_list(titles) + closing, 1)


def increcrawl(db: Path, *args: str):
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, db.parent)


@pytest_twisted.ensureDeferred
async def test_links_changed_on_every_page_are_said_once_with_the_selector(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    from tests.content.test_shops_and_comments import _crawl

    titles = ["About", "Contact", "Sample Page"]
    for slug in POSTS:
        site.put(slug, with_pages(slug, titles))
    db = tmp_path / "s.sqlite"
    settings = crawl_settings(str(db), clock, INCRECRAWL_KEEP_CONTENT=True, **UNTRUSTED)
    first = await _crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in POSTS}
    assert "[Contact](/contact/)" in first.items[0]["markdown"]  # in the page's text

    for added in ("Shop", "Events"):  # a page added to the site, then renamed
        titles = [*titles[:3], added]
        for slug in POSTS:
            site.put(slug, with_pages(slug, titles))
        clock.advance(LATER)
        again = await _crawl(site, settings)
        assert again.changes("changed") == {site.url(s) for s in POSTS}
        # One warning (the run summary's repetition of the run's warnings aside).
        warned = [line for line in again.log if line.startswith("WARNING")]
        said = [line for line in warned if "INCRECRAWL_CONTENT_SELECTOR" in line]
        assert len(said) == 1, said
        assert site.base.split("//")[1] in said[0]
        assert f"[{added}](/{added.lower()}/)" in said[0]
        assert not [line for line in again.log if "INCRECRAWL_VOLATILE_PATTERNS" in line]

    # noisy proposes no pattern for a link, and says where the fix is.
    listed = increcrawl(db, "noisy", "--min-streak", "2")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "[Events](/events/)" in listed.stdout
    assert "INCRECRAWL_CONTENT_SELECTOR" in listed.stdout
    assert "INCRECRAWL_VOLATILE_PATTERNS" not in listed.stdout
    report = json.loads(increcrawl(db, "noisy", "--min-streak", "2", "--json").stdout)
    assert report["proposed_patterns"] == []
    assert len(report["pages"]) == len(POSTS)
