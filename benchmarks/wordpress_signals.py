"""Which free signals of an edit the WordPress story's site carries (#52, 4).

    python benchmarks/wordpress_signals.py [--seed 52]

The story's site (benchmarks/wordpress_story.py: Debian's WordPress 6.1, Twenty
Twenty-Three) as it stands on day 0, then the story's days 1-3: for each of its
listings and feeds, whether it carries a modified date, whether it lists the posts
those days edit, and whether its text about those posts changed; for a post, what
its head carries. Prints; writes nothing. Needs what the story needs.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table
from benchmarks.wordpress_site import missing, wordpress_site
from benchmarks.wordpress_story import DAY, Story

LISTINGS = (
    "/",
    "/category/news/",
    "/category/travel/",
    "/category/kitchen/",
    "/category/garden/",
    "/author/admin/",
    "/feed/",
    "/feed/atom/",
    "/feed/atom/?orderby=modified",
)
DATED = {"/feed/": "<pubDate", "/feed/atom/": "<updated"}
DATES = {"<pubDate": "pubDate (published)", "<updated": "updated (modified)",
         "<time": "<time> (published)"}  # fmt: skip


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as answer:  # loopback only
        return answer.read().decode()


def about(body: str, slug: str) -> str:
    """The text a listing or feed gives about post *slug* (its entry), or ''."""
    entries = re.split(r"<li class=\"wp-block-post |<entry>|<item>", body)
    return next((e for e in entries[1:] if f"/{slug}/" in e), "")


def date(body: str, slug: str, mark: str) -> str:
    """The date *mark* gives in the entry about *slug*."""
    found = re.search(re.escape(mark) + r"[^>]*>([^<]*)", about(body, slug))
    return found.group(1) if found else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=52)
    args = parser.parse_args()
    why = missing()
    if why:
        print(f"skipped: needs a local WordPress: {why}")
        return
    story = Story(args.seed, 30, (time.time() // DAY - 32) * DAY)
    edited = [op["slug"] for day in (1, 2, 3) for op in story.by_day[day] if op["op"] == "edit"]
    with tempfile.TemporaryDirectory() as work, wordpress_site(Path(work)) as site:
        site.change(story.setup)
        before = {path: get(site.url + path) for path in LISTINGS}
        post = get(f"{site.url}/{edited[0]}/")
        for day in (1, 2, 3):
            site.change(story.by_day[day])
        after = {path: get(site.url + path) for path in LISTINGS}
    head = post.split("</head>")[0]
    print(f"Seed {args.seed}, days 1-3 edit {', '.join(edited)}.\n")
    feeds = re.findall(r'type="application/(?:rss|atom)\+xml"[^>]*href="([^"]+)"', head)
    print(
        f"A post's head: article:modified_time {'article:modified_time' in head}, JSON-LD "
        f"{'ld+json' in head}; feeds it links: {[h[len(site.url) :] for h in feeds]}; "
        f"its <time>s: {post.count('<time')} (its publish date and its comments')\n"
    )
    rows = []
    for path in LISTINGS:
        listed = [slug for slug in edited if about(before[path], slug) or about(after[path], slug)]
        moved = [slug for slug in listed if about(before[path], slug) != about(after[path], slug)]
        mark = DATED.get(path.split("?")[0], "<time")
        dated = [s for s in moved if date(before[path], s, mark) != date(after[path], s, mark)]
        rows.append([path, DATES.get(mark, mark), ", ".join(listed) or "none",
                     ", ".join(moved) or "none", ", ".join(dated) or "none"])  # fmt: skip
    print(table(["listing", "date it carries", "edited posts it lists (days 0-3)",
                 "whose entry changed", "whose date moved"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
