"""The project-shape matrix (#50): a shape is a spider, its settings and a world of
edits; each runs several times with a moved clock against a real server, and every
run's change set (the feed's items with their labels) must be the truth, the diff
of what the site showed before and after, and the run summary must count what the
feed got. The tests are ``test_matrix_*.py`` (two files: xdist gives a file to a
worker)."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from increcrawl_scrapy.testing.quotes import PER_PAGE, QuotesSite
from tests.conftest import Clock
from tests.crawling import CrawlResult, add_on, run_crawl
from tests.support.generators import DocSite
from tests.support.nginx import free_port, nginx

HOUR, DAY = 3_600.0, 86_400.0
LATER = 31 * DAY  # past the longest interval: every page due
Change = tuple[str, str]  # (label, what names the item: a quote's text, a page's URL)
SUMMARY = re.compile(r"items delivered: (\d+) new, (\d+) changed, (\d+) gone")


class World(Protocol):
    url: str

    def truth(self) -> dict[object, tuple[str, object]]:
        """What a full crawl would show now: identity -> (its name, its content)."""
        ...

    def name(self, item: dict[str, Any]) -> str:
        """How a delivered item names the one it is (gone ones included)."""
        ...


class QuotesWorld:
    """The quotes app (``testing/quotes.py``) with each quote's identity kept across
    edits, so that an edit is ``changed``, a quote that moves to another page
    nothing, an insertion or a deletion ``new`` or ``gone``."""

    def __init__(self, quotes: int = 30, login_required: bool = False, by: str = "site") -> None:
        self.site = QuotesSite(quotes, login_required=login_required)
        self.ids = list(range(quotes))
        self.made = quotes
        self.by = by  # "text": the project declared the text the key (a new text, a new item)

    @contextmanager
    def served(self, tmp: Path) -> Iterator[QuotesWorld]:
        with self.site:
            self.url = self.site.url
            yield self

    def truth(self) -> dict[object, tuple[str, object]]:
        quotes = zip(self.ids, self.site.quotes, strict=True)
        if self.by == "text":
            return {q["text"]: (str(q["text"]), q["author"]) for _, q in quotes}
        return {i: (str(q["text"]), (q["text"], q["author"], q["tags"])) for i, q in quotes}

    def name(self, item: dict[str, Any]) -> str:
        return str(item["text"])

    def pages(self) -> dict[object, int]:
        """Each quote's page number (ten a page)."""
        return {i: at // PER_PAGE + 1 for at, i in enumerate(self.ids)}

    # -- edits, as the site's editors make them --------------------------------
    def edit(self, i: int, text: str) -> None:
        self.site.edit(i, text)

    def delete(self, i: int) -> None:
        self.site.delete(i)
        self.ids.pop(i)

    def insert(self, i: int, text: str) -> None:
        self.site.insert(i, text)
        self.ids.insert(i, self._new_id())

    def add(self, count: int) -> None:
        self.site.add(count)
        self.ids.extend(self._new_id() for _ in range(count))

    def _new_id(self) -> int:
        self.made += 1
        return self.made


def quotes_edited(world: QuotesWorld) -> None:
    """Run 3's edits: one quote edited, one deleted (the quotes after it move a page
    up), one inserted (those after it move down, the last onto a new page), one
    added at the end."""
    world.edit(4, "\u201cEdited on page one.\u201d")
    world.delete(12)
    world.insert(25, "\u201cInserted on page three.\u201d")
    world.add(1)


def quotes_edited_again(world: QuotesWorld) -> None:
    """Run 5's: a quote of page two edited, the first deleted (every quote moves up
    a place, the edited one within its page: one that moved to another page and was
    edited at once is ``gone`` and ``new``, as docs/usage/addon.md says), two added."""
    world.edit(15, "\u201cEdited on page two.\u201d")
    world.delete(0)
    world.add(2)


class DocsWorld:
    """A real MkDocs site behind nginx, rebuilt after each round of edits."""

    def __init__(self, pages: int = 10) -> None:
        self.pages = pages

    @contextmanager
    def served(self, tmp: Path) -> Iterator[DocsWorld]:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.site = DocSite("mkdocs", tmp / "site", self.url, pages=self.pages)
        self.site.build()
        with nginx(self.site.out, tmp / "nginx", port=port):
            yield self

    def truth(self) -> dict[object, tuple[str, object]]:
        site = self.site
        return {
            site.url_of(slug): (site.url_of(slug), (page.title, page.edits))
            for slug, page in site.pages.items()
        }

    def name(self, item: dict[str, Any]) -> str:
        return str(item["url"])


def docs_edited(world: DocsWorld) -> None:
    """Two pages edited, one added, one deleted, one moved (a new slug, no redirect)."""
    site = world.site
    site.edit_page("topic-003")
    site.edit_page("topic-007")
    site.add_page()
    site.remove_page("topic-009")
    page = site.pages.pop("topic-005")
    page.slug = "moved-005"
    site.pages["moved-005"] = page
    site.build()


def docs_edited_again(world: DocsWorld) -> None:
    site = world.site
    site.edit_page("topic-003")
    site.remove_page("topic-002")
    site.add_page()
    site.build()


@dataclass
class Step:
    """Edits, then runs: the first *advance* after the last run, each of *more* runs
    that much later again; the runs' changes together must be the edits' diff."""

    advance: float
    edits: Callable[[Any], None] | None = None
    more: tuple[float, ...] = ()


@dataclass
class Shape:
    name: str
    world: Callable[[], Any]
    spider: type
    settings: dict[str, Any] = field(default_factory=dict)
    steps: tuple[Step, ...] = ()
    feeds: int = 0  # feed files besides the signal's items, each to hold them all
    bound: dict[str, Any] = field(default_factory=dict)  # settings of every run past the first


def diff(before: dict[object, tuple[str, object]], after: dict[object, tuple[str, object]]):
    changes = [("new", after[k][0]) for k in after.keys() - before.keys()]
    changes += [("gone", before[k][0]) for k in before.keys() - after.keys()]
    changes += [
        ("changed", after[k][0]) for k in after.keys() & before.keys() if after[k] != before[k]
    ]
    return Counter(changes)


async def run_shape(shape: Shape, tmp: Path) -> list[list[Change]]:
    """Every step of *shape*; the change sets delivered, a step at a time."""
    clock = Clock(1_800_000_000.0)
    world_cm: AbstractContextManager[Any] = shape.world().served(tmp)
    delivered_by_step = []
    with world_cm as world:
        db = str(tmp / "state.sqlite")
        runs = 0
        before: dict[object, tuple[str, object]] = {}
        for number, step in enumerate(shape.steps):
            placed = world.pages() if shape.bound else {}
            if step.edits is not None:
                step.edits(world)
            after = world.truth()
            got: Counter[Change] = Counter()
            for advance in (step.advance, *step.more):
                clock.advance(advance)
                runs += 1
                bound = shape.bound if runs > 1 else {}
                result = await _crawl(shape, world, db, clock, tmp / f"run{runs}", bound)
                got.update((item["change"], world.name(item)) for item in result.items)
            expected = diff(before, after)
            # A bounded run that finds a quote that moved up a page (its new side
            # first) delivers it new, once: docs/usage/addon.md, bounded runs.
            ahead = _moved_up(before, after, placed, world.pages()) if placed else Counter()
            assert got - expected <= ahead, (number, sorted((got - expected).elements()))
            got -= ahead
            assert got == expected, (
                f"step {number}: delivered {sorted((got - expected).elements())} more, "
                f"{sorted((expected - got).elements())} missing"
            )
            delivered_by_step.append(sorted(got.elements()))
            before = after
    return delivered_by_step


def _moved_up(
    before: dict[object, tuple[str, object]],
    after: dict[object, tuple[str, object]],
    placed: dict[object, int],
    now: dict[object, int],
) -> Counter[Change]:
    """The quotes that moved, unchanged, to an earlier page: each may be ``new`` once."""
    same = [k for k in before.keys() & after.keys() if before[k] == after[k]]
    return Counter(("new", after[k][0]) for k in same if now[k] < placed[k])


async def _crawl(
    shape: Shape, world: Any, db: str, clock: Clock, out: Path, bound: dict[str, Any]
) -> CrawlResult:
    out.mkdir(parents=True)
    settings = add_on(db, clock, LOG_LEVEL="INFO", **shape.settings, **bound)
    feeds = [out / f"feed{n}.jsonl" for n in range(shape.feeds)]
    if feeds:
        settings["FEEDS"] = {str(path): {"format": "jsonlines"} for path in feeds}
    if "IMAGES_STORE" in settings:
        settings["IMAGES_STORE"] = str(out.parent / "images")
    if "HTTPCACHE_DIR" in settings:
        settings["HTTPCACHE_DIR"] = str(out.parent / "httpcache")
    result = await run_crawl(settings, spider_class=shape.spider, site=world.url)
    log = "\n".join(result.log)
    assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
    # The run summary counts what the feed got, by its labels.
    summary = SUMMARY.findall(log)
    assert summary, log[-2000:]
    feed = Counter(item["change"] for item in result.items)
    counted = dict(zip(("new", "changed", "gone"), map(int, summary[-1]), strict=True))
    assert counted == {label: feed[label] for label in counted}, (counted, feed)
    assert set(feed) <= {"new", "changed", "gone"}, feed
    for path in feeds:  # every feed got every item
        written = [json.loads(line) for line in path.read_text().splitlines()]
        assert _sorted(written) == _sorted(result.items), path
    return result


def _sorted(items: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(item, sort_keys=True, default=str) for item in items)
