"""The operator's edits of a state (``scrapy increcrawl due`` and ``forget``), part of
``StateStore``: rows made due now, rows forgotten."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from increcrawl_scrapy.state.backend import serialized

if TYPE_CHECKING:
    from increcrawl_scrapy.state.backend import Backend
    from increcrawl_scrapy.state.results import Results


class OperatorEdits:
    """Mixed into ``StateStore``, whose database, results and normalization it uses."""

    database: Backend
    results: Results
    normalize: Callable[[str], str]

    @serialized
    def make_due(self, *, url: str | None = None, seed: str | None = None) -> int:
        """Make one page (*url*), a seed's pages, or every page (neither) due now;
        how many rows. A gone page made due is checked again too (the queue takes
        gone rows only while listed); a live row keeps its count of missing runs."""
        target, params = self._target(url, seed)
        with self.database.transaction() as db:
            return int(db.execute(db.sql.make_due[target], params).rowcount)

    @serialized
    def forget(self, *, url: str | None = None, seed: str | None = None) -> int:
        """Drop one page (*url*) or a seed's pages; how many rows. The sitemaps that
        listed them are read whole again next time, so a page still listed comes
        back as new."""
        if url is None and seed is None:
            raise ValueError("forget needs a URL or a seed")
        target, params = self._target(url, seed)
        with self.database.transaction() as db:
            db.execute(db.sql.reread_sitemaps[target], params)
            if seed is not None:
                db.execute(db.sql.forget_seed_sitemaps, (seed,))
            db.execute(db.sql.forget_contents[target], params)
            db.execute(db.sql.forget_memories[target], params)
            # A page's checks go with it (SQLite may give a later page its id).
            db.execute(db.sql.forget_checks[target], params)
            return int(db.execute(db.sql.forget_pages[target], params).rowcount)

    def _target(self, url: str | None, seed: str | None) -> tuple[str, tuple[str, ...]]:
        self.results.settle()  # nothing buffered or handed out may outlive the edit
        if url is not None:
            return "page", (self.normalize(url),)
        if seed is not None:
            return "seed", (seed,)
        return "all", ()
