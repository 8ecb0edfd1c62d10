"""Documentation sites built by real generators (MkDocs, Sphinx, Hugo), for tests and
benchmarks of what a page's own content is.

The pages' sources are ours (deterministic text with paragraphs, lists, code and a
table); the HTML around them is the generator's: MkDocs's default theme lists every
page in each page's navigation, Sphinx's alabaster a sidebar with the whole toctree,
the Hugo layout a menu of every page and a "recent posts" box. Any other theme of
theirs is one ``theme`` away (MkDocs Material, with template overrides in
``overrides``; furo, the Read the Docs theme, the PyData theme; a Hugo theme's folder
in ``hugo_theme``); ``tests/support/more_generators.py`` builds Jekyll and VitePress too.
``nav_labels`` renames pages in the site's navigation only (a navigation-only
rebuild). Serve ``out`` with any web server (the tests use nginx). Needs ``mkdocs``,
``sphinx`` (PyPI) and ``hugo``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from xml.sax.saxutils import escape

GENERATORS = ("mkdocs", "sphinx", "hugo")
#: Each generator's themes: the first is the default, the second a redesign.
THEMES = {
    "mkdocs": ("mkdocs", "readthedocs"),
    "sphinx": ("alabaster", "classic"),
    "hugo": ("plain", "boxed"),
    "jekyll": ("minima", "minima"),
    "vitepress": ("default", "default"),
}
_WORD_TEXT = (
    "cache request response spider crawler pipeline item setting signal engine scheduler "
    "downloader middleware selector extension feed export queue page sitemap header cookie "
    "proxy retry redirect timeout concurrency throttle domain schema record state lease "
    "worker batch token field value option command"
)
_WORDS = _WORD_TEXT.split()


_SHAPES = (
    "The {} is kept with the {} until the {} has been written.",
    "When a {} fails, the {} is retried and the {} is not lost.",
    "Each {} has a {} of its own, which you can set in the {}.",
    "If the {} is too slow, raise the {} or lower the {} for that site.",
    "This is how the {} finds out whether a {} needs a new {}.",
)


#: Text a page's encoding, entities and a browser's serialization could each change.
_UNICODE = "Notes: café, naïve, “quoted”, 5\u00a0€ \u2014 ✓ 1 < 2 & 3 > 2, 日本語."


def _sentence(rng: random.Random) -> str:
    return rng.choice(_SHAPES).format(*(rng.choice(_WORDS) for _ in range(3)))


@dataclass
class Page:
    slug: str
    title: str
    paragraphs: list[str]
    edits: int = 0
    written: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    created: datetime = field(default_factory=lambda: datetime(2026, 1, 1, tzinfo=timezone.utc))
    footnote: str = "A footnote."

    def markdown(self) -> str:
        body = [f"# {self.title}", ""]
        for index, paragraph in enumerate(self.paragraphs):
            body += [paragraph, ""]
            if index == 0:
                body += [_UNICODE, ""]
            if index == 1:
                body += [f"- {w}" for w in self.title.lower().split()] + [""]
            if index == 2:
                body += ["```python", f"settings = {{'{self.slug.upper()}': {index}}}", "```", ""]
                body += ["## Settings", ""]  # a table of contents, where the theme has one
                body += ['!!! note "Keep in mind"', f"    {self.slug} is read once.[^1]", ""]
        body += ["| option | value |", "| --- | --- |", f"| {self.slug} | {len(self.paragraphs)} |"]
        body += ["", f"[^1]: {self.footnote}"]
        return "\n".join(body) + "\n"

    def rst(self) -> str:
        bar = "=" * len(self.title)
        body = [bar, self.title, bar, ""]
        for index, paragraph in enumerate(self.paragraphs):
            body += [paragraph, ""]
            if index == 0:
                body += [_UNICODE, ""]
            if index == 1:
                body += [f"* {w}" for w in self.title.lower().split()] + [""]
            if index == 2:
                code = f"   settings = {{'{self.slug}': {index}}}"
                body += [".. code-block:: python", "", code, ""]
                body += [".. note::", "", f"   {self.slug} is read once [#]_.", ""]
        body += [f".. [#] {self.footnote}", ""]
        return "\n".join(body) + "\n"


class DocSite:
    """A site's sources and its build. ``out`` is what a web server serves."""

    generators: tuple[str, ...] = GENERATORS

    def __init__(
        self,
        generator: str,
        workdir: Path,
        base_url: str,
        pages: int = 20,
        seed: int = 1,
        own_sitemap: bool = False,
        dates: bool = True,
    ) -> None:
        """*own_sitemap*: MkDocs's own sitemap (every page dated with the build), not
        one with each page's date of last edit (Hugo's is its own either way);
        without *dates*, that sitemap dates nothing (as WordPress before 6.5)."""
        if generator not in self.generators:
            raise ValueError(f"generator must be one of {self.generators}")
        self.generator = generator
        self.own_sitemap = own_sitemap
        self.dates = dates
        self.src = workdir / "src"
        self.out = workdir / "out"
        self.base_url = base_url.rstrip("/")
        self.theme = THEMES[generator][0]
        #: Template overrides (MkDocs: ``custom_dir``), by path inside it.
        self.overrides: dict[str, str] = {}
        #: A Hugo theme's folder (its name is the folder's), instead of our layout.
        self.hugo_theme: Path | None = None
        #: Labels of pages in the site's navigation only (by slug; else the title).
        self.nav_labels: dict[str, str] = {}
        self.footer_year = 2026
        self.rng = random.Random(seed)
        self.pages: dict[str, Page] = {}
        self.created = 0
        self.builds = 0
        self.today = datetime(2026, 1, 1, tzinfo=timezone.utc)
        for _ in range(pages):
            self.add_page()

    # -- changes between builds -------------------------------------------------

    def add_page(self) -> str:
        self.created += 1
        slug = f"topic-{self.created:03d}"
        title = f"Topic {self.created} {self.rng.choice(_WORDS).title()}"
        paragraphs = [" ".join(_sentence(self.rng) for _ in range(4)) for _ in range(5)]
        self.pages[slug] = Page(slug, title, paragraphs, written=self.today, created=self.today)
        return slug

    def remove_page(self, slug: str) -> None:
        del self.pages[slug]

    def edit_page(self, slug: str) -> None:
        """A real edit: one paragraph of the page's own text rewritten."""
        page = self.pages[slug]
        page.edits += 1
        index = page.edits % len(page.paragraphs)
        page.paragraphs[index] = f"Revision {page.edits}: " + _sentence(self.rng)
        page.written = self.today

    def edit_footnote(self, slug: str) -> None:
        """A real edit of the page's footnote only."""
        page = self.pages[slug]
        page.edits += 1
        page.footnote = f"A footnote, revision {page.edits}."
        page.written = self.today

    def advance(self, days: float = 1) -> None:
        self.today += timedelta(days=days)

    def nav_label(self, slug: str) -> str:
        return self.nav_labels.get(slug, self.pages[slug].title)

    def url_of(self, slug: str) -> str:
        if self.generator in ("sphinx", "vitepress"):
            return f"{self.base_url}/{slug}.html"
        return f"{self.base_url}/{slug}/"

    def urls(self) -> list[str]:
        return [self.url_of(slug) for slug in sorted(self.pages)]

    def listings(self) -> set[str]:
        """Pages listing the others in their own content (Hugo's home and section
        lists): a page added or removed is a real change of theirs."""
        if self.generator == "hugo":
            return {f"{self.base_url}/", f"{self.base_url}/posts/"}
        if self.generator == "jekyll":
            return {f"{self.base_url}/"}
        return set()

    # -- building -----------------------------------------------------------------

    def build(self) -> None:
        """Build the site as a deploy does: every file written again, with a newer
        time than the last build's (so a web server's validators all move, even
        for builds within one second)."""
        shutil.rmtree(self.src, ignore_errors=True)
        self.src.mkdir(parents=True)
        getattr(self, f"_build_{self.generator}")()
        self.builds += 1
        stamp = time.time() + 60 * self.builds
        for path in self.out.rglob("*"):
            os.utime(path, (stamp, stamp))

    def run(self, *command: str) -> None:
        subprocess.run(
            command,
            cwd=self.src,
            check=True,
            capture_output=True,
            timeout=300,
        )

    def _build_mkdocs(self) -> None:
        docs = self.src / "docs"
        docs.mkdir()
        (docs / "index.md").write_text("# Home\n\nThe documentation's home page.\n")
        for slug, page in self.pages.items():
            (docs / f"{slug}.md").write_text(page.markdown())
        for name, text in self.overrides.items():
            (self.src / "overrides" / name).parent.mkdir(parents=True, exist_ok=True)
            (self.src / "overrides" / name).write_text(text)
        custom = "  custom_dir: overrides\n" if self.overrides else ""
        nav = "".join(f"  - {json.dumps(self.nav_label(s))}: {s}.md\n" for s in sorted(self.pages))
        (self.src / "mkdocs.yml").write_text(
            f"site_name: Example docs\nsite_url: {self.base_url}/\ntheme:\n  name: {self.theme}\n"
            f"{custom}copyright: Copyright {self.footer_year} Example\n"
            f"nav:\n  - Home: index.md\n{nav}"
            "markdown_extensions:\n  - admonition\n  - footnotes\n  - tables\n"
            "  - toc:\n      permalink: true\n"
        )
        self.run(sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(self.out))
        if not self.own_sitemap:  # MkDocs dates every page with the build
            self.write_sitemap()

    def _build_sphinx(self) -> None:
        (self.src / "conf.py").write_text(
            f"project = 'Example'\ncopyright = '{self.footer_year}, Example'\n"
            f"html_theme = '{self.theme}'\nhtml_baseurl = '{self.base_url}/'\n"
        )
        toctree = "\n".join(
            f"   {self.nav_labels[slug]} <{slug}>" if slug in self.nav_labels else f"   {slug}"
            for slug in sorted(self.pages)
        )
        (self.src / "index.rst").write_text(
            f"Example\n=======\n\n.. toctree::\n   :maxdepth: 2\n\n{toctree}\n"
        )
        for slug, page in self.pages.items():
            (self.src / f"{slug}.rst").write_text(page.rst())
        shutil.rmtree(self.out, ignore_errors=True)
        self.run(sys.executable, "-m", "sphinx", "-q", "-b", "html", "-E", ".", str(self.out))
        self.write_sitemap()

    def _build_hugo(self) -> None:
        content = self.src / "content" / "posts"
        content.mkdir(parents=True)
        for number, (slug, page) in enumerate(sorted(self.pages.items())):
            created = (page.created + timedelta(minutes=number)).isoformat()
            stamp = (page.written + timedelta(minutes=number)).isoformat()
            (content / f"{slug}.md").write_text(
                f'---\ntitle: "{page.title}"\nlinkTitle: "{self.nav_label(slug)}"\n'
                f'date: {created}\nlastmod: {stamp}\nurl: "/{slug}/"\n---\n\n'
                + page.markdown().split("\n", 2)[2]
            )
        config = (
            f'baseURL = "{self.base_url}/"\ntitle = "Example blog"\n'
            f'copyright = "{self.footer_year}"\ndisableKinds = ["taxonomy", "term", "RSS"]\n'
        )
        if self.hugo_theme is not None:  # the theme's layouts, its menu from the config
            shutil.copytree(self.hugo_theme, self.src / "themes" / self.hugo_theme.name)
            menu = "".join(
                f'[[menu.main]]\nname = "{self.nav_label(slug)}"\nurl = "/{slug}/"\n'
                f"weight = {number}\n"
                for number, slug in enumerate(sorted(self.pages))
            )
            config = f'theme = "{self.hugo_theme.name}"\n{config}{menu}'
        else:
            self._hugo_layouts()
        (self.src / "config.toml").write_text(config)
        shutil.rmtree(self.out, ignore_errors=True)
        self.run("hugo", "--quiet", "-d", str(self.out))

    def _hugo_layouts(self) -> None:
        layouts = self.src / "layouts" / "_default"
        layouts.mkdir(parents=True)
        boxed = self.theme == "boxed"
        base = _HUGO_BASE.replace("BOXED", "box" if boxed else "wide")
        (layouts / "baseof.html").write_text(base)
        (layouts / "single.html").write_text(_HUGO_SINGLE)
        (layouts / "list.html").write_text(_HUGO_LIST)

    def write_sitemap(self) -> None:
        entries = "".join(
            f"<url><loc>{escape(self.url_of(slug))}</loc>"
            + (f"<lastmod>{page.written.date().isoformat()}</lastmod>" if self.dates else "")
            + "</url>"
            for slug, page in sorted(self.pages.items())
        )
        (self.out / "sitemap.xml").write_text(
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{entries}</urlset>\n'
        )
        gz = self.out / "sitemap.xml.gz"
        gz.unlink(missing_ok=True)  # MkDocs writes one with build dates


_HUGO_BASE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{ .Title }} | {{ .Site.Title }}</title></head>
<body class="BOXED">
<header><a href="/">{{ .Site.Title }}</a>
<nav><ul>{{ range .Site.RegularPages.ByTitle }}
<li><a href="{{ .RelPermalink }}">{{ .LinkTitle }}</a></li>{{ end }}</ul></nav>
</header>
<div class="columns">
<main>{{ block "main" . }}{{ end }}</main>
<aside><h3>Recent posts</h3><ul>{{ range first 5 .Site.RegularPages.ByLastmod.Reverse }}
<li><a href="{{ .RelPermalink }}">{{ .Title }}</a></li>{{ end }}</ul>
<p>{{ len .Site.RegularPages }} posts so far.</p></aside>
</div>
<footer><p>&copy; {{ .Site.Copyright }} Example blog. Built with Hugo.</p></footer>
</body></html>
"""
_HUGO_SINGLE = """{{ define "main" }}<article><h1>{{ .Title }}</h1>
<p class="meta">Last updated {{ .Lastmod.Format "2006-01-02" }}</p>
{{ .Content }}
<nav class="pager">{{ with .PrevInSection }}
<a href="{{ .RelPermalink }}">Previous: {{ .Title }}</a>{{ end }}
{{ with .NextInSection }}<a href="{{ .RelPermalink }}">Next: {{ .Title }}</a>{{ end }}</nav>
</article>{{ end }}
"""
_HUGO_LIST = """{{ define "main" }}<h1>{{ .Title }}</h1><ul>{{ range .Pages }}
<li><a href="{{ .RelPermalink }}">{{ .Title }}</a></li>{{ end }}</ul>{{ end }}
"""
