"""The operator's edits of a state (``scrapy increcrawl due`` and ``forget``), part of
``StateStore``: rows made due now, rows forgotten."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from increcrawl_scrapy.state.database import serialized

if TYPE_CHECKING:
    from increcrawl_scrapy.state.database import Database
    from increcrawl_scrapy.state.results import Results


class OperatorEdits:
    """Mixed into ``StateStore``, whose database, results and normalization it uses."""

    database: Database
    results: Results
    normalize: Callable[[str], str]

    @serialized
    def make_due(self, *, url: str | None = None, seed: str | None = None) -> int:
        """Make one page (*url*), a seed's pages, or every page (neither) due now;
        how many rows. A gone page made due is checked again too (the queue takes
        gone rows only while listed); a live row keeps its count of missing runs."""
        where, params = self._target(url, seed)
        with self.database.transaction() as db:
            return int(
                db.execute(
                    "UPDATE pages SET next_check = 0, "
                    f"missing_runs = iif(gone, 0, missing_runs) {where}",
                    params,
                ).rowcount
            )

    @serialized
    def forget(self, *, url: str | None = None, seed: str | None = None) -> int:
        """Drop one page (*url*) or a seed's pages; how many rows. The sitemaps that
        listed them are read whole again next time, so a page still listed comes
        back as new."""
        if url is None and seed is None:
            raise ValueError("forget needs a URL or a seed")
        where, params = self._target(url, seed)
        with self.database.transaction() as db:
            db.execute(
                "UPDATE sitemaps SET digest = '', etag = NULL, last_modified = NULL "
                f"WHERE url IN (SELECT sitemap_url FROM pages {where})",
                params,
            )
            if seed is not None:
                db.execute("DELETE FROM sitemaps WHERE seed = ?", (seed,))
            for table in ("contents", "memories"):
                db.execute(
                    f"DELETE FROM {table} WHERE normalized_url IN "
                    f"(SELECT normalized_url FROM pages {where})",
                    params,
                )
            # A page's checks go with it (SQLite may give a later page its id).
            db.execute(f"DELETE FROM checks WHERE page IN (SELECT id FROM pages {where})", params)
            return int(db.execute(f"DELETE FROM pages {where}", params).rowcount)

    def _target(self, url: str | None, seed: str | None) -> tuple[str, tuple[str, ...]]:
        self.results.settle()  # nothing buffered or handed out may outlive the edit
        if url is not None:
            return "WHERE normalized_url = ?", (self.normalize(url),)
        if seed is not None:
            return "WHERE seed = ?", (seed,)
        return "", ()
