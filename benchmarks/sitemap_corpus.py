"""Read the sitemap corpus (tests/discovery/sitemap_corpus/) with this project, with Scrapy's
``SitemapSpider`` parser (``scrapy.utils.sitemap.Sitemap``) and with
ultimate-sitemap-parser, and count, per document, the expected URLs each found and
the URLs each found that are not expected (a wrong URL is a miss, not a gain).

    python benchmarks/sitemap_corpus.py          # prints the table, writes RESULTS.md
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "discovery" / "sitemap_corpus"


def _body(raw: bytes) -> bytes:
    return gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw


def ours(raw: bytes) -> list[str]:
    from increcrawl_scrapy.discovery.parse import (
        SitemapError,
        SitemapStats,
        decompress,
        iter_sitemap,
    )

    try:
        entries = iter_sitemap(decompress(raw, 50 << 20), SitemapStats())
        return [entry.loc for entry in entries if not entry.alternate]
    except SitemapError:
        return []


def scrapy_sitemap(raw: bytes) -> list[str]:
    """As ``SitemapSpider`` reads a sitemap body (it gunzips first)."""
    from scrapy.utils.sitemap import Sitemap

    try:
        return [entry["loc"] for entry in Sitemap(_body(raw)) if entry.get("loc")]
    except Exception:  # a parser that gives up finds nothing
        return []


def usp(raw: bytes) -> list[str]:
    from usp.objects.sitemap import AbstractIndexSitemap, AbstractPagesSitemap
    from usp.tree import sitemap_from_str

    logging.getLogger("usp").setLevel(logging.CRITICAL)
    try:
        tree = sitemap_from_str(_body(raw).decode("utf-8", "replace"))
    except Exception:  # a parser that gives up finds nothing
        return []
    if isinstance(tree, AbstractIndexSitemap):
        return [child.url for child in tree.sub_sitemaps]
    if isinstance(tree, AbstractPagesSitemap):
        return [page.url for page in tree.pages]
    return []


PARSERS: dict[str, Callable[[bytes], list[str]]] = {
    "increcrawl": ours,
    "SitemapSpider": scrapy_sitemap,
    "ultimate-sitemap-parser": usp,
}


def main() -> None:
    expected: dict[str, list[str]] = json.loads((CORPUS / "expected.json").read_text())
    rows = []
    totals = {name: [0, 0] for name in PARSERS}
    for doc, wanted in sorted(expected.items()):
        raw = (CORPUS / doc).read_bytes()
        row: list[object] = [f"`{doc}`", len(wanted)]
        for name, parse in PARSERS.items():
            found = set(parse(raw))
            hits, extra = len(found & set(wanted)), len(found - set(wanted))
            totals[name][0] += hits
            totals[name][1] += extra
            row.append(f"{hits}" + (f" (+{extra} wrong)" if extra else ""))
        rows.append(row)
    every = sum(len(urls) for urls in expected.values())
    rows.append(
        ["**all**", every] + [f"**{hits}** (+{extra} wrong)" for hits, extra in totals.values()]
    )
    body = (
        f"{len(expected)} documents of real-world shapes, each with a hand-written list of "
        "the URLs it holds (for an index: its child sitemaps). Per parser: the expected "
        "URLs it found, and (+N wrong) URLs it returned that are not expected.\n\n"
        + table(["document", "expected", *PARSERS], rows)
    )
    print(body)
    write_section("Sitemap corpus", body)


if __name__ == "__main__":
    main()
