"""The WordPress story of issue #52: freshness where the sitemap's dates say nothing.

    python benchmarks/wordpress_story.py [--days 30] [--dates] [--seed 52] [--no-write]
        [--feed /feed/atom/] [--set INCRECRAWL_NAME=value ...]

Debian's WordPress with its default theme (benchmarks/wordpress_site.py: MariaDB,
php-fpm, nginx, all on 127.0.0.1 and thrown away after), 60 posts in 4 categories and
2 pages. Each simulated day: two posts edited, a few comments, a post published every
third day and one trashed every seventh, at their times of the day, all through
WordPress's own PHP functions and seeded; then at 23:00 one ``scrapy crawl
incremental`` on /wp-sitemap.xml with the crawler's clock moved to that time
(``INCRECRAWL_CLOCK=increcrawl_scrapy.testing.clock.shifted_time``). Day 0 is the first
crawl of the site as it stands; days 1..N are the story.

Each crawl's clock starts at 23:00:00 to the second, as cron starts it. An edit is
seen on the first run that fetched its post after the edit and reported the post
changed (the crawl's feed); one of the last week not seen by the end is judged by its
post's next check in the crawl's state. Requests are nginx's access log; a daily full
crawl's are the site's page count that day (the core sitemap's URLs). ``--dates``:
the sitemap carries each post's modified date as WordPress 6.5 writes ``<lastmod>``
(a mu-plugin; 6.1 writes none). Not in CI: it skips where WordPress, MariaDB or PHP
are missing. Needs Debian's wordpress, wordpress-theme-twentytwentythree,
mariadb-server, php-fpm, php-mysql, php-xml and nginx. ``--feed PATH``: the crawl
reads that feed of the site beside its sitemap (``/feed/atom/``: the ten newest posts,
each dated by its modified time); the feed's requests count as page requests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import table, write_section
from benchmarks.wordpress_site import WordPressSite, missing, wordpress_site

DAY = 86400.0
RUN_HOUR = 23  # the daily crawl; the day's changes happen before it
VOCABULARY = (
    "garden river harvest lantern market winter coffee bicycle window orchard stone letter "
    "kitchen meadow festival railway library evening mountain recipe harbour season village "
    "bridge journey workshop weather morning island painting"
)
WORDS = VOCABULARY.split()


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def paragraph(rng: random.Random) -> str:
    return f"<!-- wp:paragraph -->\n<p>{text(rng, 40)}</p>\n<!-- /wp:paragraph -->\n"


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


class Story:
    """The site's changes, drawn up front from the seed: the same in both stories."""

    def __init__(self, seed: int, days: int, start: float) -> None:
        rng = random.Random(seed)
        self.start = start
        self.categories = ["news", "travel", "kitchen", "garden"]
        self.setup = [
            {"op": "category", "at": stamp(start - 200 * DAY), "slug": s, "title": s.title()}
            for s in self.categories
        ]
        for slug in ("about", "contact"):
            self.setup.append(self.publish(rng, slug, start - 150 * DAY, "page"))
        posts = [f"post-{n:02d}" for n in range(1, 61)]
        born = sorted(start - rng.uniform(1, 120) * DAY for _ in posts)
        for slug, at in zip(posts, born, strict=True):
            self.setup.append(self.publish(rng, slug, at))
            for _ in range(rng.randint(0, 3)):
                self.setup.append(self.comment(rng, slug, at + rng.uniform(0.1, 1) * DAY))
        self.setup.sort(key=lambda op: op["at"])
        trashed = rng.sample(posts, days // 7)  # never edited: each edit stays findable
        live = [p for p in posts if p not in trashed]
        self.by_day: dict[int, list[dict]] = {}
        for day in range(1, days + 1):
            at = partial(lambda d: start + d * DAY + rng.uniform(0, RUN_HOUR - 1) * 3600, day)
            ops = [self.edit(rng, slug, at()) for slug in rng.sample(live, 2)]
            ops += [self.comment(rng, rng.choice(live), at()) for _ in range(3)]
            if day % 3 == 0:
                live.append(f"new-{day:02d}")
                ops.append(self.publish(rng, live[-1], at()))
            if day % 7 == 0:
                ops.append({"op": "trash", "at": stamp(at()), "slug": trashed[day // 7 - 1]})
            self.by_day[day] = sorted(ops, key=lambda op: op["at"])

    def publish(self, rng: random.Random, slug: str, at: float, kind: str = "post") -> dict:
        content = "".join(paragraph(rng) for _ in range(rng.randint(3, 6)))
        return {
            "op": "publish", "type": kind, "slug": slug, "at": stamp(at), "content": content,
            "title": text(rng, 4)[:-1], "categories": [rng.choice(self.categories)],
        }  # fmt: skip

    def edit(self, rng: random.Random, slug: str, at: float) -> dict:
        return {"op": "edit", "slug": slug, "at": stamp(at), "content": paragraph(rng)}

    def comment(self, rng: random.Random, slug: str, at: float) -> dict:
        author = rng.choice(["Ola", "Ines", "Kwame", "Mei", "Tomás"])
        return {"op": "comment", "slug": slug, "at": stamp(at), "author": author,
                "content": text(rng, 12)}  # fmt: skip

    def run_at(self, day: int) -> float:
        return self.start + day * DAY + RUN_HOUR * 3600


def crawl(sitemap_url: str, db: Path, feed: Path, shift: float, *settings: str) -> list[dict]:
    """One ``scrapy crawl incremental`` with the clock moved by *shift* (and *settings*,
    ``NAME=value``); its items."""
    from tests.support.process import crawl_command, crawl_env

    feed.unlink(missing_ok=True)
    command = crawl_command(
        sitemap_url,
        db,
        "INCRECRAWL_FETCHER=direct",
        "INCRECRAWL_CLOCK=increcrawl_scrapy.testing.clock.shifted_time",
        "LOG_LEVEL=WARNING",
        "TELNETCONSOLE_ENABLED=False",
        *settings,
        feed=feed,
    )
    env = crawl_env(None, INCRECRAWL_TIME_SHIFT=str(shift))
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    lines = feed.read_text().splitlines() if feed.exists() else []
    return [json.loads(line) for line in lines if line.strip()]


def access_lines(access: Path, offset: int) -> tuple[list[tuple[int, str]], int]:
    """(status, path) of the requests logged since line *offset*, and the new offset."""
    lines = access.read_text().splitlines()
    return [(int(line.split()[0]), line.split()[1]) for line in lines[offset:]], len(lines)


def schedule(db: Path, start: float) -> dict[str, tuple[float, float]]:
    """Each page's next check (story day) and interval (days), from the crawl's state."""
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as state:
        rows = state.execute("SELECT url, next_check, interval_s FROM pages").fetchall()
    return {url: ((due - start) / DAY, interval / DAY) for url, due, interval in rows}


def one_day(
    site: WordPressSite,
    story: Story,
    day: int,
    work: Path,
    offset: int,
    settings: list[str],
    feed_path: str | None = None,
) -> tuple:
    """The day's changes, then its crawl: what the crawl asked nginx for, what it
    reported changed, and the site's pages that day (the core sitemap's URLs)."""
    ops = story.by_day.get(day, [])
    site.change(ops)
    shift = story.run_at(day) - time.time()
    db, feed = work / "state.sqlite", work / "feed.jsonl"
    sources = site.url + "/wp-sitemap.xml" + (f",{site.url}{feed_path}" if feed_path else "")
    items = crawl(sources, db, feed, shift, *settings)
    requests, offset = access_lines(site.access, offset)
    pages = {path for _, path in requests if not path.startswith(("/wp-sitemap", "/robots"))}
    listed = {url[len(site.url) :] for url in site.sitemap_urls()}
    offset = access_lines(site.access, offset)[1]  # past the sitemap just read
    changed = {item["url"][len(site.url) :] for item in items if item["change"] == "changed"}
    record = {
        "day": day,
        "requests": len(requests),
        "pages": sum(not path.startswith(("/wp-sitemap", "/robots")) for _, path in requests),
        "fetched": len(pages & listed),
        "full": len(listed),
        "edits": sum(op["op"] == "edit" for op in ops),
        "off_sitemap": sorted(pages - listed),
        "statuses": sorted({status for status, _ in requests}),
    }
    return ops, record, pages, changed, offset


def run_story(
    days: int, dates: bool, seed: int, settings: list[str], feed_path: str | None = None
) -> dict:
    start = (time.time() // DAY - days - 2) * DAY  # the story ends before the machine's now
    story = Story(seed, days, start)
    per_day, edits, waiting = [], [], []  # edits: {post, day, seen}
    fetched_days: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as work, wordpress_site(Path(work), dates) as site:
        site.change(story.setup)
        offset = access_lines(site.access, 0)[1]
        for day in range(days + 1):
            ops, record, pages, changed, offset = one_day(
                site, story, day, Path(work), offset, settings, feed_path
            )
            for path in pages:
                fetched_days.setdefault(path.strip("/"), []).append(day)
            edits += [{"post": op["slug"], "day": day, "seen": None} for op in ops
                      if op["op"] == "edit"]  # fmt: skip
            pending = [e for e in edits if e["seen"] is None]
            for edit in pending:
                if f"/{edit['post']}/" in changed:
                    edit["seen"] = day
            # A harness check: a post fetched after its edit and not reported changed.
            record["fetched_not_changed"] = sorted(
                {e["post"] for e in pending if e["seen"] is None and f"/{e['post']}/" in pages}
            )
            record["seen"] = sum(e["seen"] == day for e in pending)
            due = schedule(Path(work) / "state.sqlite", start)
            waiting.append({e["post"]: due.get(f"{site.url}/{e['post']}/") for e in pending})
            per_day.append(record)
            print(json.dumps(record), flush=True)
    return {"days": per_day, "edits": edits, "fetched": fetched_days, "waiting": waiting}


def first_run_after(due: tuple[float, float] | None) -> int | None:
    """The day whose run first makes a check due at story day *due[0]* (runs at 23:00)."""
    return None if due is None else math.ceil(due[0] - RUN_HOUR / 24)


def targets(result: dict, dates: bool) -> list[list[str]]:
    """The issue's targets, each with its limit beside it; the other story's are shown."""
    days, edits = result["days"], result["edits"]
    story, first = days[1:], days[:14]
    waited = [None if e["seen"] is None else e["seen"] - e["day"] for e in edits]
    # An edit of the last week not seen yet has its week run past the story's end: it
    # is judged by its post's next check in the state (checks only ever come earlier).
    last = days[-1]["day"]
    open_edits = [e for e in edits if e["seen"] is None and e["day"] + 7 > last]
    due = [first_run_after(result["waiting"][-1].get(e["post"])) for e in open_edits]
    overdue = sum(d is None or d - e["day"] > 7 for d, e in zip(due, open_edits, strict=True))
    within_week = sum(w is not None and w <= 7 for w in waited) + len(open_edits) - overdue
    same_day = sum(w == 0 for w in waited) / len(edits)
    fetched = sum(d["fetched"] for d in story) / sum(d["full"] for d in story)
    requests = sum(d["pages"] for d in story) / sum(d["full"] for d in story)
    first_requests = sum(d["pages"] for d in first) / sum(d["full"] for d in first)
    late = [e for e in edits if e["day"] >= 3]
    late_same = sum(e["seen"] == e["day"] for e in late)
    after = [d["pages"] for d in days if d["day"] > 7]
    median = statistics.median(after or [0])
    over = [d["day"] for d in days if d["day"] > 7 and d["pages"] > 1.5 * median]
    n = len(edits)
    rows = [
        ("edits seen within 7 days", f"{within_week} of {n} ({len(open_edits)} of the "
         f"last week's by their next check: {overdue} late)", "all", within_week == n),
        ("edits seen at all", f"{sum(w is not None for w in waited)} of {n}", "", None),
        ("edits seen the same day", f"{same_day:.1%}", f"at least the share of pages "
         f"fetched a day ({fetched:.1%})", same_day >= fetched),
        (f"page requests, days 1-{len(story)}, of a daily full crawl", f"{requests:.1%}",
         "at most 45% (without dates)", requests <= 0.45 if not dates else ""),
        (f"page requests, days 0-{len(first) - 1}, of a daily full crawl", f"{first_requests:.1%}",
         "at most 25% (with dates)", first_requests <= 0.25 if dates else ""),
        ("edits from day 3 seen the same day", f"{late_same} of {len(late)}",
         "all (with dates)", late_same == len(late) if dates else ""),
        ("days after day 7 over 1.5x their median", f"{len(over)} {over if over else ''}"
         f" (median {median:g})".replace("  ", " "), "none", not over),
    ]  # fmt: skip
    verdict = {True: "met", False: "**not met**", None: "", "": "the other story's"}
    return [[*row[:3], verdict[row[3]]] for row in rows]


def waits(result: dict, limit: int = 12) -> str:
    """How long edits waited, and the longest waits: when their post was fetched before,
    and what the crawl's state said after the day of the edit."""
    edits, lines = result["edits"], []
    delays = Counter("never" if e["seen"] is None else e["seen"] - e["day"] for e in edits)
    order = sorted(delays, key=lambda d: (d == "never", d if d != "never" else 0))
    summary = ", ".join(f"{d} d: {delays[d]}" if d != "never" else f"never: {delays[d]}"
                        for d in order)  # fmt: skip
    late = [e for e in edits if e["seen"] != e["day"]]
    late.sort(key=lambda e: -(e["seen"] - e["day"] if e["seen"] is not None else 99))
    for edit in late[:limit]:
        fetches = result["fetched"].get(edit["post"], [])
        before = [d for d in fetches if d < edit["day"]]
        due = result["waiting"][edit["day"]].get(edit["post"])
        wait = due and due[0] - edit["day"] - RUN_HOUR / 24  # from that day's run
        plan = f"due {wait:.1f} d later, interval {due[1]:.1f} d" if due else "not in state"
        seen = "never" if edit["seen"] is None else f"day {edit['seen']}"
        lines.append(
            f"- {edit['post']} edited day {edit['day']}, seen {seen}; fetched before on days "
            f"{before[-3:] or 'none'}; after that day's run: {plan}"
        )
    more = f"\n- … and {len(late) - limit} more" if len(late) > limit else ""
    return f"Days from edit to seen: {summary}.\n\n" + "\n".join(lines) + more


def busy_days(result: dict) -> str:
    """The pages fetched on each day after day 7 over 1.5x their median (lockstep shows)."""
    days = [d for d in result["days"] if d["day"] > 7]
    median = statistics.median([d["pages"] for d in days] or [0])
    lines = [
        f"- day {d['day']}: "
        + ", ".join(sorted(f"/{p}" for p, on in result["fetched"].items() if d["day"] in on))
        for d in days
        if d["pages"] > 1.5 * median
    ]
    return (
        "Days after day 7 over 1.5x their median:\n\n" + "\n".join(lines) + "\n\n" if lines else ""
    )


def report(result: dict, dates: bool, seed: int, settings: list[str]) -> str:
    days = result["days"]
    target_table = table(["target", "measured", "limit", ""], targets(result, dates))
    day_table = table(
        ["day", *(str(d["day"]) for d in days)],
        [
            ["page requests", *(d["pages"] for d in days)],
            ["all requests", *(d["requests"] for d in days)],
            ["site pages", *(d["full"] for d in days)],
            ["edits made / seen", *(f"{d['edits']}/{d['seen']}" for d in days)],
        ],
    )
    story = "with 6.5-style `<lastmod>`" if dates else "without dates (WordPress 6.1's sitemap)"
    story += "".join(f", `{setting}`" for setting in settings)
    return (
        f"WordPress story {story}: {len(days) - 1} days after a first crawl (day 0), seed "
        f"{seed}, 2 edits a day ({len(result['edits'])} in all).\n\n{target_table}\n\n"
        f"Per day:\n\n{day_table}\n\n{busy_days(result)}The longest waits:\n\n{waits(result)}\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--dates", action="store_true", help="6.5-style <lastmod>")
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--save", type=Path, help="the run's records as JSON here")
    parser.add_argument("--set", action="append", default=[], help="a crawl's NAME=value")
    parser.add_argument("--feed", help="a feed of the site the crawl reads too: /feed/atom/")
    args = parser.parse_args()
    why = missing()
    if why:
        print(f"skipped: the WordPress story needs a local WordPress: {why}")
        return
    result = run_story(args.days, args.dates, args.seed, args.set, args.feed)
    if args.save:
        args.save.write_text(json.dumps(result))
    shown = args.set + ([f"feed {args.feed}"] if args.feed else [])
    body = report(result, args.dates, args.seed, shown)
    print(body)
    if not args.no_write:
        name = "WordPress story" + (", with dates" if args.dates else ", no dates")
        name += "".join(f", {setting}" for setting in shown)
        write_section(name, body)


if __name__ == "__main__":
    main()
