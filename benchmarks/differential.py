"""The main content we read against the same rules applied to Chromium's DOM, on
real generators' pages; and each generator's navigation-only rebuild, crawled.

    python benchmarks/differential.py [--pages 8] [--variants "sphinx furo,jekyll minima"]
                                      [--no-rebuilds] [--rebuild] [--no-write]

Each generator/theme pair of ``tests/support/more_generators.VARIANTS`` builds a site
(cached under ``INCRECRAWL_GENERATORS_CACHE``, a temp folder by default; ``--rebuild``
builds again), nginx serves it on 127.0.0.1, and for each page the text the package
fingerprints (``page_text``: the main content's markdown) is taken from the raw HTML
and from the DOM Chromium builds of it (``chromium --headless --dump-dom``, its
serialization given to the same function). The table: pages, pages identical, pages
differing with the first differing line, and the time.

Then (unless ``--no-rebuilds``) the navigation-only rebuild of each, crawled by
``scrapy crawl incremental`` with a moved clock: a page renamed in the navigation,
a page added to it and one page really edited; every page is fetched again
(sitemap dates not trusted). Reported: the pages changed other than the edited one,
the added one and the site's listings (Hugo's and Jekyll's home pages list posts).
VitePress comes from npm (installed into the cache on the first run); a Hugo theme
from ``INCRECRAWL_HUGO_THEME`` (a folder; PaperMod v7.0 was used).
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import html.parser
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Why a pair's pages differ, where they do (checked by hand; anything else differing
#: is a defect until explained).
EXPLAINED = {
    "mkdocs material + overrides": (
        "parser (expected until the HTML5 parser): the override's stray `</li>` closes "
        "the primary navigation early in libxml2's HTML parser, and the pages after the "
        "current one land in `<main>` outside any `<nav>`; Chromium ignores the stray "
        "tag. With the stray tags deleted, our text equals Chromium's."
    ),
    "quirks": (
        "parser (expected until the HTML5 parser), one page each: libxml2 turns the NUL "
        "byte into U+FFFD where browsers drop it; it cuts content nested past 255 "
        "elements (silently): the same cut applies to Chromium's DOM re-read, so it shows "
        "only as text lost (`lost`: characters of Chromium's DOM the parser drops)."
    ),
}
LATER = 200 * 86400.0  # every page due again


def page_paths(out: Path) -> list[str]:
    """The site's pages as URL paths: every HTML file but search, index, error and
    redirect pages."""
    skip = {"404.html", "search.html", "genindex.html"}
    paths = []
    for path in sorted(out.rglob("*.html")):
        relative = path.relative_to(out).as_posix()
        if path.name in skip or relative.startswith(("_", "assets/")):
            continue
        if b'http-equiv="refresh"' in path.read_bytes()[:2048]:
            continue  # a redirect (Hugo's /page/1/ aliases): a browser leaves it

        paths.append("/" + relative.removesuffix("index.html"))
    return paths


def dumped_dom(url: str, cache: Path, raw: bytes) -> str:
    """Chromium's DOM of *url* serialized, cached by the page's bytes."""
    key = cache / f"{hashlib.sha256(raw).hexdigest()}.html"
    if key.exists():
        return key.read_text()
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",  # as root
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--virtual-time-budget=3000",  # scripts that build the page run first
                "--dump-dom",
                url,
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    dom = done.stdout.decode("utf-8")
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text(dom)
    return dom


def read(html: str | bytes) -> tuple[str, str]:
    """The page's text as fingerprinted, and how its main content was found."""
    from increcrawl_scrapy.content.page_text import ContentOptions, page_text

    body = html if isinstance(html, bytes) else html.encode("utf-8")
    found = page_text(body, "text/html", body.decode("utf-8", "replace"), ContentOptions())
    return found.text, found.how


class _AllText(html.parser.HTMLParser):
    """Every character of text outside scripts and styles, by a parser without a depth
    limit (the standard library's): what the package's parser drops shows beside it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.chars, self.skipping = 0, 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.skipping += tag in ("script", "style", "template")

    def handle_endtag(self, tag: str) -> None:
        self.skipping -= tag in ("script", "style", "template") and self.skipping > 0

    def handle_data(self, data: str) -> None:
        if not self.skipping:
            self.chars += len("".join(data.split()))


def lost_chars(dom: str) -> int:
    """Characters of text in Chromium's DOM that the package's parser does not see."""
    import lxml.html

    everything = _AllText()
    everything.feed(dom)
    root = lxml.html.document_fromstring(dom.encode("utf-8"))
    for hidden in root.xpath("//script | //style | //template"):
        hidden.drop_tree()
    return max(everything.chars - len("".join(root.text_content().split())), 0)


def first_difference(ours: str, browser: str) -> str:
    for line in difflib.unified_diff(ours.splitlines(), browser.splitlines(), lineterm="", n=0):
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++")):
            return ("ours: " if line[0] == "-" else "Chromium: ") + line[1:100]
    return "(whitespace only)"


def built(name: str, pages: int, rebuild: bool) -> Path:
    """*name*'s site built once into the cache; its ``out`` folder."""
    from tests.support import generators, more_generators
    from tests.support.more_generators import cache_dir, variant_site

    # Keyed by the builders' code too: a cached site is never one of older pages.
    code = b"".join(Path(m.__file__).read_bytes() for m in (generators, more_generators))
    stamp = hashlib.sha256(code).hexdigest()[:10]
    folder = cache_dir() / "sites" / f"{name.replace(' ', '_').replace('/', '_')}-{pages}-{stamp}"
    if rebuild:
        shutil.rmtree(folder, ignore_errors=True)
    if not (folder / "built").exists():
        site = variant_site(name, folder, "http://127.0.0.1:8000", pages=pages)
        site.build()
        (folder / "built").write_text(json.dumps(site.urls()))
    return folder / "out"


#: The parser's known faults, put into real pages (furo's) by hand: name -> (page, the
#: text replaced, what replaces it). Chromium's DOM is the reference for each.
QUIRKS = {
    "a NUL byte": ("topic-001.html", "Notes: caf", "Notes: \x00caf"),
    "300 nested elements": ("topic-002.html", "<p>Notes:", "<div>" * 300 + "<p>Notes:"),
}


def quirks_site(pages: int, rebuild: bool) -> Path:
    """furo's site with :data:`QUIRKS` put into three of its pages (the others as built)."""
    from tests.support.more_generators import cache_dir

    source = built("sphinx furo", pages, rebuild)
    out = cache_dir() / "sites" / f"quirks-{pages}"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(source, out)
    for page, old, new in QUIRKS.values():
        html = (out / page).read_text()
        assert old in html, (page, old)
        (out / page).write_text(html.replace(old, new, 1))
    for path in out.glob("topic-*.html"):
        if path.name not in {page for page, _, _ in QUIRKS.values()}:
            path.unlink()
    return out


def differential(name: str, out: Path) -> dict:
    from increcrawl_scrapy.content.fingerprint import content_fingerprint
    from tests.support.more_generators import cache_dir
    from tests.support.nginx import nginx

    started = time.monotonic()
    result = {"variant": name, "pages": 0, "identical": 0, "differing": [], "same_print": 0}
    with tempfile.TemporaryDirectory() as work, nginx(out, Path(work)) as (url, _):
        for path in page_paths(out) if name != "quirks" else [f"/{q[0]}" for q in QUIRKS.values()]:
            raw = (out / path.lstrip("/")).joinpath(*(["index.html"] if path.endswith("/") else []))
            body = raw.read_bytes()
            ours, how = read(body)
            dom = dumped_dom(url + path, cache_dir() / "doms", body)
            browser, browser_how = read(dom)
            result["pages"] += 1
            lost = lost_chars(dom)
            if lost:
                result["differing"].append(f"{path} lost: {lost} characters")
                continue
            if ours == browser and how == browser_how:
                result["identical"] += 1
                continue
            same = content_fingerprint(ours) == content_fingerprint(browser)
            result["same_print"] += same
            note = f"{how}/{browser_how}: " if how != browser_how else ""
            result["differing"].append(f"{path} {note}{first_difference(ours, browser)}")
    result["seconds"] = time.monotonic() - started
    return result


def crawl(site_url: str, db: Path, feed: Path, shift: float) -> list[dict]:
    from benchmarks.real_sites import crawl as real_sites_crawl

    return real_sites_crawl(
        site_url, db, feed, shift, False, "INCRECRAWL_LASTMOD_MIN_EVIDENCE=100000"
    )


def navigation_rebuild(name: str, pages: int) -> dict:
    """A page renamed in the navigation, one added, one edited: the changes reported."""
    from tests.support.more_generators import variant_site
    from tests.support.nginx import free_port, nginx

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        port = free_port()
        site = variant_site(name, root / "site", f"http://127.0.0.1:{port}", pages=pages)
        site.build()
        with nginx(site.out, root / "nginx", port=port):
            first = crawl(site.base_url, root / "s.sqlite", root / "f.jsonl", 0)
            site.nav_labels["topic-002"] = "A renamed entry"
            added = site.add_page()
            site.edit_page("topic-003")
            site.build()
            second = crawl(site.base_url, root / "s.sqlite", root / "f.jsonl", LATER)
    changed = {i["url"] for i in second if i.get("change") == "changed"}
    new = {i["url"] for i in second if i.get("change") == "new"}
    edited = site.url_of("topic-003")
    return {
        "variant": name,
        "pages": len({i["url"] for i in first}),
        "edit_seen": edited in changed,
        "added_new": site.url_of(added) in new,
        "listings": sorted(changed & site.listings()),
        "false": sorted(urlsplit(u).path for u in changed - {edited} - site.listings()),
        "seconds": time.monotonic() - started,
    }


def _diff_row(name: str, found: dict) -> list:
    print(json.dumps(found), flush=True)
    differing = found["differing"]
    label = "furo's pages with: " + ", ".join(QUIRKS) if name == "quirks" else name
    return [
        label,
        found["pages"],
        found["identical"],
        f"{len(differing)} ({found['same_print']} same fingerprint)",
        "<br>".join(f"`{d}`" for d in differing[:3]) or "-",
        EXPLAINED.get(name, "**not explained**") if differing else "-",
        f"{found['seconds']:.1f} s",
    ]


def main() -> None:
    from tests.support.more_generators import (
        VARIANTS,
        install_vitepress,
        variant_missing,
    )

    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rebuild", action="store_true", help="build the cached sites again")
    parser.add_argument("--no-rebuilds", action="store_true", help="no navigation-only crawls")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if shutil.which("npm"):
        install_vitepress()
    diff_rows, nav_rows, skipped = [], [], []
    for name in args.variants.split(","):
        missing = variant_missing(name)
        if missing:
            skipped.append(f"- {name}: skipped, {missing}")
            continue
        diff_rows.append(_diff_row(name, differential(name, built(name, args.pages, args.rebuild))))
        if not args.no_rebuilds:
            story = navigation_rebuild(name, args.pages)
            print(json.dumps(story), flush=True)
            nav_rows.append(
                [
                    name,
                    story["pages"],
                    "yes" if story["edit_seen"] else "**no**",
                    "yes" if story["added_new"] else "**no**",
                    len(story["listings"]),
                    ", ".join(story["false"]) or "none",
                    f"{story['seconds']:.1f} s",
                ]
            )
    if "sphinx furo" in args.variants.split(",") and not variant_missing("sphinx furo"):
        found = differential("quirks", quirks_site(args.pages, args.rebuild))
        diff_rows.append(_diff_row("quirks", found))
    diff_table = table(
        [
            "generator/theme",
            "pages",
            "identical",
            "differing",
            "first differing lines",
            "why",
            "time",
        ],
        diff_rows,
    )
    text = f"{diff_table}\n"
    if nav_rows:
        nav_table = table(
            [
                "generator/theme",
                "pages",
                "edit reported",
                "added page new",
                "listings changed",
                "other pages changed",
                "time",
            ],
            nav_rows,
        )
        text += (
            f"\nNavigation-only rebuild (a label renamed, a page added, one edit):\n\n{nav_table}\n"
        )
    if skipped:
        text += "\n" + "\n".join(skipped) + "\n"
    print(text)
    if not args.no_write:
        write_section(
            "Differential: our main content against Chromium's DOM",
            f"{args.pages} pages a site; the text fingerprinted (`page_text`) of the raw HTML "
            "against that of `chromium --headless --dump-dom`'s serialization.\n\n" + text,
        )


if __name__ == "__main__":
    main()
