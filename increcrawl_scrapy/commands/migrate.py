"""``scrapy increcrawl migrate --from SOURCE --to TARGET``: a whole state copied
between SQLite and PostgreSQL (either way), then checked."""

from __future__ import annotations

import argparse

from increcrawl_scrapy.state import StateError, copy_state, driver_errors, shown


def _reported() -> tuple[type[Exception], ...]:
    """What a copy can raise that is told in one line (read when raised: psycopg is
    imported by the copy itself)."""
    return (StateError, *driver_errors())


def run(opts: argparse.Namespace) -> int:
    if not opts.source or not opts.target:
        print("migrate needs --from SOURCE and --to TARGET (a SQLite file or postgresql://...)")
        return 2
    try:
        report = copy_state(opts.source, opts.target, sample=opts.sample)
    except _reported() as exc:
        print(f"Not migrated: {exc}")
        return 1
    print(f"Copied {shown(opts.source)} to {shown(opts.target)}:")
    for table in report:
        verdict = "ok" if table.ok else "DIFFERS"
        print(
            f"  {table.table:<9} {table.source_rows:>10,} rows -> {table.target_rows:>10,}; "
            f"{table.sampled:,} sampled rows compared: {verdict}"
        )
        for key in table.differing[:10]:
            print(f"    differs: {key}")
    if all(table.ok for table in report):
        print("Verified: every table has as many rows in both, and the sampled rows are equal.")
        return 0
    print("The copy does not match its source: do not use it.")
    return 1
