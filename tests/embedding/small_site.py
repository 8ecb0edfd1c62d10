"""A small site of HTML files served by nginx, edited between daily runs of a
project's spider through the add-on: for the tests of listing pages' edge cases
(``test_listing_edges.py``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import scrapy

from tests.conftest import Clock
from tests.crawling import add_on, run_crawl
from tests.servers import nginx, write_served

DAY = 86_400.0
START = 1_800_000_000.0  # midnight of the first day's run


class SiteSpider(scrapy.Spider):
    """A spider of the small site: it starts at its home page (*base*)."""

    def __init__(self, base: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [base + "/"]


def html(body: str) -> str:
    return f"<html><head><title>t</title></head><body>{body}</body></html>"


@dataclass
class Run:
    fetched: list[str]  # "METHOD-less" paths nginx answered, in order
    items: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)
    answered: list[str] = field(default_factory=list)  # "status path", in order
    log: str = ""

    def changes(self, key: str = "url") -> list[tuple[str, Any]]:
        return sorted((item["change"], item.get(key)) for item in self.items)


class SmallSite:
    """*root*'s files served at *url*; each run's requests read from *access*."""

    def __init__(self, root: Path, url: str, access: Path, state: Path) -> None:
        self.root, self.url, self.access, self.state = root, url, access, state
        self.clock = Clock(START)

    def set(self, path: str, body: str) -> None:
        """The page at *path* (``/x/`` is ``x/index.html``) now shows *body*."""
        file = self.root / path.lstrip("/")
        if path.endswith("/"):
            file = file / "index.html"
        file.parent.mkdir(parents=True, exist_ok=True)
        write_served(file, html(body))

    async def run(self, spider: type, day: float, **settings: Any) -> Run:
        """A run of *spider* on *day* (fractions: hours after midnight)."""
        self.clock.now = START + day * DAY
        before = self.access.stat().st_size if self.access.exists() else 0
        result = await run_crawl(
            add_on(str(self.state), self.clock, LOG_LEVEL="INFO", **settings),
            spider_class=spider,
            base=self.url,
        )
        log = "\n".join(result.log)
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
        with self.access.open("rb") as lines:
            lines.seek(before)
            raw = [line.split() for line in lines.read().splitlines() if line]
        fetched = [parts[1].decode() for parts in raw]
        answered = [f"{parts[0].decode()} {parts[1].decode()}" for parts in raw]
        return Run(fetched, result.items, result.stats, answered, log)


@contextlib.contextmanager
def small_site(tmp: Path, extra: str = "") -> Iterator[SmallSite]:
    root = tmp / "site"
    root.mkdir()
    with nginx(root, tmp / "nginx", extra=extra) as (url, access):
        yield SmallSite(root, url, access, tmp / "state.sqlite")
