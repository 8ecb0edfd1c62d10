"""``DocSite``'s builds by generators that are not Python's or Hugo: Jekyll (Debian's
``jekyll`` with its ``minima`` theme: ``apt-get install jekyll jekyll-theme-minima``)
and VitePress (npm: its default theme, installed once by :func:`install_vitepress`).

The pages are ``DocSite``'s; each generator's own templates put the site's header,
navigation (every page, by its label), sidebars and footer around them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.generators import GENERATORS, DocSite

#: VitePress's major version, installed by :func:`install_vitepress`.
VITEPRESS = "vitepress@1"


def cache_dir() -> Path:
    """Where built sites and installed tools are kept between runs
    (``INCRECRAWL_GENERATORS_CACHE``, else a folder of the system's temp dir)."""
    default = Path(tempfile.gettempdir()) / "increcrawl-generators"
    return Path(os.environ.get("INCRECRAWL_GENERATORS_CACHE", default))


def vitepress_dir() -> Path:
    """The folder whose ``node_modules`` holds VitePress."""
    return cache_dir() / "vitepress"


def vitepress_installed() -> bool:
    return (vitepress_dir() / "node_modules" / ".bin" / "vitepress").exists()


def install_vitepress() -> None:
    """VitePress from npm into :func:`vitepress_dir` (once: a minute, ~40 MB)."""
    if vitepress_installed():
        return
    folder = vitepress_dir()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text('{"name": "increcrawl-vitepress", "private": true}\n')
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", VITEPRESS],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=600,
    )


class VariantSite(DocSite):
    """A ``DocSite`` whose generator may be Jekyll or VitePress too."""

    generators = (*GENERATORS, "jekyll", "vitepress")

    def _build_jekyll(self) -> None:
        build_jekyll(self)

    def _build_vitepress(self) -> None:
        build_vitepress(self)


def build_jekyll(site: DocSite) -> None:
    """minima's pages: its header lists every page (``header_pages``, by title; minima
    has no other label), its home page is a listing."""
    pages = sorted(site.pages)
    (site.src / "_config.yml").write_text(
        f"title: Example site\nurl: {json.dumps(site.base_url)}\ntheme: minima\n"
        "plugins: [jekyll-feed, jekyll-seo-tag]\n"
        f"author: Example {site.footer_year}\n"
        "header_pages:\n" + "".join(f"  - {slug}.md\n" for slug in pages)
    )
    (site.src / "index.md").write_text("---\nlayout: home\ntitle: Home\n---\n\nThe home page.\n")
    for slug in pages:
        page = site.pages[slug]
        (site.src / f"{slug}.md").write_text(
            f"---\nlayout: page\ntitle: {json.dumps(page.title)}\npermalink: /{slug}/\n---\n\n"
            + page.markdown().split("\n", 2)[2]
        )
    shutil.rmtree(site.out, ignore_errors=True)
    site.run("jekyll", "build", "--quiet", "-d", str(site.out))
    site.write_sitemap()


def build_vitepress(site: DocSite) -> None:
    """VitePress's default theme: a top bar, a sidebar of every page by its label,
    an outline of the page's headings and previous/next links."""
    if not vitepress_installed():
        raise RuntimeError(f"VitePress is not installed in {vitepress_dir()}")
    pages = sorted(site.pages)
    sidebar = [{"text": site.nav_label(slug), "link": f"/{slug}"} for slug in pages]
    config = {
        "title": "Example docs",
        "cleanUrls": False,
        "themeConfig": {
            "nav": [{"text": "Guide", "link": f"/{pages[0]}"}] if pages else [],
            "sidebar": sidebar,
            "footer": {"copyright": f"Copyright {site.footer_year} Example"},
        },
    }
    (site.src / ".vitepress").mkdir()
    (site.src / ".vitepress" / "config.mjs").write_text(f"export default {json.dumps(config)}\n")
    (site.src / "index.md").write_text("# Home\n\nThe documentation's home page.\n")
    for slug in pages:
        (site.src / f"{slug}.md").write_text(site.pages[slug].markdown())
    (site.src / "node_modules").symlink_to(vitepress_dir() / "node_modules")
    binary = vitepress_dir() / "node_modules" / ".bin" / "vitepress"
    site.run(str(binary), "build", ".")
    shutil.rmtree(site.out, ignore_errors=True)
    shutil.copytree(site.src / ".vitepress" / "dist", site.out)
    site.write_sitemap()


#: A template override with the quirk of a real project's (the Starlette documentation's
#: Material ``toc-item.html``): the item's ``<li>`` closed at once, and closed again at
#: the end. Browsers ignore the stray ``</li>``; a parser that does not may close the
#: navigation around it early.
MATERIAL_STRAY_END_TAG = {
    "partials/toc-item.html": (
        '<li class="md-nav__item"></li>\n'
        '<a href="{{ toc_item.url }}" class="md-nav__link">'
        '<span class="md-ellipsis">{{ toc_item.title }}</span></a>\n'
        "{% if toc_item.children %}\n"
        '<nav class="md-nav" aria-label="{{ toc_item.title | striptags }}">'
        '<ul class="md-nav__list">\n'
        '{% for toc_item in toc_item.children %}{% include "partials/toc-item.html" %}'
        "{% endfor %}\n</ul></nav>\n{% endif %}\n</li>\n"
    )
}

#: Real generator/theme pairs: name -> (generator, theme). Hugo's with a theme takes
#: its folder from :func:`hugo_theme_dir`.
VARIANTS = {
    "mkdocs (default theme)": ("mkdocs", "mkdocs"),
    "mkdocs material": ("mkdocs", "material"),
    "mkdocs material + overrides": ("mkdocs", "material"),
    "sphinx alabaster": ("sphinx", "alabaster"),
    "sphinx furo": ("sphinx", "furo"),
    "sphinx rtd theme": ("sphinx", "sphinx_rtd_theme"),
    "sphinx pydata theme": ("sphinx", "pydata_sphinx_theme"),
    "hugo (own layout)": ("hugo", "plain"),
    "hugo PaperMod": ("hugo", "plain"),
    "jekyll minima": ("jekyll", "minima"),
    "vitepress (default theme)": ("vitepress", "default"),
}
_MODULES = {
    "material": "material",
    "furo": "furo",
    "sphinx_rtd_theme": "sphinx_rtd_theme",
    "pydata_sphinx_theme": "pydata_sphinx_theme",
}


def hugo_theme_dir() -> Path:
    """A Hugo theme's folder (``INCRECRAWL_HUGO_THEME``, else ``themes/PaperMod`` of
    :func:`cache_dir`: PaperMod v7.0, the last for Debian 12's Hugo 0.111)."""
    default = cache_dir() / "themes" / "PaperMod"
    return Path(os.environ.get("INCRECRAWL_HUGO_THEME", default))


def variant_missing(name: str) -> str | None:
    """Why *name* cannot be built here, or None."""
    generator, theme = VARIANTS[name]
    if generator in ("mkdocs", "sphinx"):
        for module in (generator, _MODULES.get(theme, generator)):
            try:
                __import__(module)
            except ImportError:
                return f"{module} is not installed (pip)"
    elif generator == "vitepress":
        return None if vitepress_installed() else f"VitePress is not in {vitepress_dir()}"
    elif shutil.which(generator) is None:
        return f"{generator} is not installed (apt)"
    if generator == "jekyll" and _missing_gem("minima"):
        return "minima is not installed (apt: jekyll-theme-minima)"
    if name == "hugo PaperMod" and not (hugo_theme_dir() / "layouts").is_dir():
        return f"no Hugo theme in {hugo_theme_dir()} (INCRECRAWL_HUGO_THEME)"
    return None


def _missing_gem(name: str) -> bool:
    done = subprocess.run(["gem", "list", "-i", name], capture_output=True, check=False)
    return done.returncode != 0


def variant_site(name: str, workdir: Path, base_url: str, pages: int = 12) -> DocSite:
    """*name*'s site (:data:`VARIANTS`), not built yet."""
    generator, theme = VARIANTS[name]
    site = VariantSite(generator, workdir, base_url, pages=pages)
    site.theme = theme
    if name.endswith("+ overrides"):
        site.overrides = dict(MATERIAL_STRAY_END_TAG)
    if name == "hugo PaperMod":
        site.hugo_theme = hugo_theme_dir()
    return site
