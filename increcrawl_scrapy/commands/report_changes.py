"""What changed, for the report: each recent run's change set (the pages new,
changed or gone in it, with when), the history of those pages (their checks over
the runs the state keeps: ``state/history.py``, read through ``StateReader``), and
the diff of a page's last change where its text is kept (``INCRECRAWL_KEEP_CONTENT``;
the ``diff`` command's).

Everything is bounded, so the file stays small whatever the site's size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from increcrawl_scrapy.commands.pages import diff_lines

if TYPE_CHECKING:
    from increcrawl_scrapy.state import StateReader

CHANGE_RUNS_SHOWN = 30  # the latest runs whose change sets are listed
CHANGES_SHOWN = 200  # pages listed for one run
PAGES_SHOWN = 1_000  # pages whose history the report carries
DIFFS_SHOWN = 100
DIFF_LINES = 400  # of one diff


def changes(
    reader: StateReader, run_ids: list[int], also: list[int], asked: Sequence[int] = ()
) -> dict[str, Any]:
    """The report's ``change_sets`` (latest run first), ``histories`` (pages with their
    ``checks``) and ``diffs`` (by page id) for a seed's *run_ids*; *also*: pages
    whose history is carried even if no listed run changed them; *asked*: pages
    whose history comes first (``report URL``)."""
    recent = run_ids[-CHANGE_RUNS_SHOWN:][::-1]
    kept = reader.run_check_counts(recent)
    sets = reader.change_sets([run for run in recent if kept[run]], CHANGES_SHOWN)
    listed = [c["page"] for run in recent for c in sets.get(run, [])]
    wanted = list(dict.fromkeys([*asked, *listed, *also]))
    pages = reader.pages_by_ids(wanted[:PAGES_SHOWN])
    checks = reader.page_checks(list(pages))
    for page_id, page in pages.items():
        page["checks"] = checks[page_id]
    diffs: dict[int, str] = {}
    for run in recent:
        for change in sets.get(run, []):
            shown = pages.get(change["page"])
            change["shown"] = shown is not None  # its history is in the report
            if shown is None or change["outcome"] != "changed" or len(diffs) >= DIFFS_SHOWN:
                continue
            text = _diff(reader, shown, change["at"])
            if text is not None:
                diffs[change["page"]] = text
                change["diff"] = True
    return {
        "change_sets": [
            {"run": run, "checks": kept[run], "changes": sets.get(run, [])} for run in recent
        ],
        "histories": list(pages.values()),  # the latest changes' pages first
        "diffs": {str(page_id): text for page_id, text in diffs.items()},
    }


def _diff(reader: StateReader, page: dict[str, Any], at: float) -> str | None:
    """The diff of the change a check at *at* found, if its texts are still kept
    (only a page's last change is: an older change has no diff)."""
    kept = reader.last_change(page["normalized_url"])
    if kept is None or kept.previous is None or abs(kept.changed_at - at) > 1e-3:
        return None
    lines = diff_lines(page["url"], kept)
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more lines\n"]
    return "".join(lines)
