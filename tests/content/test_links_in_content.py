"""A list of the site's links inside the page's content (WordPress's Page List block
placed in each post, outside any <nav>; pages WordPress rendered,
``markup/wordpress/README.txt``) changes on every page at once when a page is added
to the site: the crawl says so in one line and points at
INCRECRAWL_CONTENT_SELECTOR, and neither it nor ``noisy`` proposes a volatile pattern
for one link (the next page added would change every page again)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import pytest_twisted

from tests.conftest import Clock
from tests.content.served_pages import LATER, POSTS, UNTRUSTED, Site, crawl, rendered, site
from tests.crawling import crawl_settings
from tests.servers import nginx_binary
from tests.support.process import run_process

__all__ = ["site"]  # the fixture
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(nginx_binary() is None, reason="nginx is not installed"),
]


def increcrawl(db: Path, *args: str):
    command = [sys.executable, "-m", "scrapy", "increcrawl", *args, "-s", f"INCRECRAWL_DB={db}"]
    return run_process(command, db.parent)


@pytest_twisted.ensureDeferred
async def test_links_changed_on_every_page_are_said_once_with_the_selector(
    site: Site, tmp_path: Path, clock: Clock
) -> None:
    for slug in POSTS:
        site.put(slug, rendered(f"links-{slug}.0"))
    db = tmp_path / "s.sqlite"
    settings = crawl_settings(str(db), clock, INCRECRAWL_KEEP_CONTENT=True, **UNTRUSTED)
    first = await crawl(site, settings)
    assert first.changes("new") == {site.url(s) for s in POSTS}
    assert "[Contact](/contact/)" in first.items[0]["markdown"]  # in the page's text

    # A page added to the site ("Shop"), then renamed ("Events").
    for version, link in ((1, "[Shop](/shop/)"), (2, "[Events](/events/)")):
        for slug in POSTS:
            site.put(slug, rendered(f"links-{slug}.{version}"))
        clock.advance(LATER)
        again = await crawl(site, settings)
        assert again.changes("changed") == {site.url(s) for s in POSTS}
        # One warning (the run summary's repetition of the run's warnings aside).
        warned = [line for line in again.log if line.startswith("WARNING")]
        said = [line for line in warned if "INCRECRAWL_CONTENT_SELECTOR" in line]
        assert len(said) == 1, said
        assert site.base.split("//")[1] in said[0] and link in said[0]
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
