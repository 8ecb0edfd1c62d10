"""Pages served by nginx from a folder, for the content stories on real markup
(``markup/``): a site that the tests write page by page, and its crawl."""

from __future__ import annotations

from pathlib import Path
from string import Template

import pytest

from tests.crawling import run_crawl
from tests.servers import nginx, write_served

MARKUP = Path(__file__).parent / "markup"
LATER = 200 * 86400.0  # every page due again
UNTRUSTED = {"INCRECRAWL_LASTMOD_MIN_EVIDENCE": 100_000}


def markup(name: str) -> Template:
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
        write_served(self.root / slug / "index.html", html)
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


async def crawl(site: Site, settings: dict) -> object:
    return await run_crawl(settings, sitemap_url=f"{site.base}/sitemap.xml")


#: Posts WordPress rendered with its default theme (``markup/wordpress/README.txt``).
POSTS = ("hello-world", "second-post", "third-post")


def rendered(name: str) -> str:
    return (MARKUP / "wordpress" / f"{name}.html").read_text()
