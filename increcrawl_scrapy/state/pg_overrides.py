"""Statements of the state's parts that PostgreSQL runs in its own words
(``dialect.OVERRIDES``), where the rewrite of SQLite's would be slow or wrong."""

from __future__ import annotations

from increcrawl_scrapy.state import dialect
from increcrawl_scrapy.state.hosts import DEMOTE
from increcrawl_scrapy.state.runs import _APPLY_CHUNK, _APPLY_FEED_CHUNK, _FILL_CHUNK

dialect.OVERRIDES[_FILL_CHUNK] = (
    "INSERT INTO pg_temp.chunk SELECT e->>0, e->>1, e->>2, e->>3, e->>4, "
    "(e->>5)::boolean::int FROM jsonb_array_elements(%s::jsonb) AS e"
)

# PostgreSQL: the chunk joined once (UPDATE ... FROM), not a subquery per row.
_PG_SEEN = """
UPDATE pages AS p SET last_seen = %(now)s, seen_run = %(run)s, missing_runs = 0,
    sitemap_lastmod = coalesce(CASE WHEN c.future = 0 THEN c.lastmod END, p.sitemap_lastmod)
FROM pg_temp.chunk AS c WHERE p.normalized_url = c.normalized_url
"""
_PG_ATTACH = """
UPDATE pages AS p SET seed = %(seed)s, sitemap_url = SITEMAP
FROM pg_temp.chunk AS c WHERE p.normalized_url = c.normalized_url
  AND (p.seed IS DISTINCT FROM %(seed)s
       OR (c.sitemap_url IS NOT NULL AND p.sitemap_url IS DISTINCT FROM c.sitemap_url))
"""
for _chunk_statements, _sitemap in (
    (_APPLY_CHUNK, "coalesce(c.sitemap_url, p.sitemap_url)"),
    (_APPLY_FEED_CHUNK, "coalesce(p.sitemap_url, c.sitemap_url)"),
):
    dialect.OVERRIDES[_chunk_statements[1]] = _PG_SEEN
    dialect.OVERRIDES[_chunk_statements[2]] = _PG_ATTACH.replace("SITEMAP", _sitemap)

# PostgreSQL's min() is an aggregate: two values take LEAST.
dialect.OVERRIDES[DEMOTE] = (
    "UPDATE pages SET next_check = LEAST(next_check, "
    "coalesce(last_fetched, first_seen) + %s) WHERE host = %s AND gone = 0"
)
