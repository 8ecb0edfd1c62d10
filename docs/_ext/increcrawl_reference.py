"""The settings and stats references, tied to the code.

``{setting} NAME`` and ``{stat} KEY`` blocks (MyST directives) document one setting or
stats key each. The signature of a setting shows its default as ``config.DEFAULTS``
has it, so a changed default changes the page; a name the code does not know, or a
name of the code no page documents, is a warning (an error under ``sphinx-build -W``,
as ``.ci/run`` builds). ``tests/package/test_docs.py`` runs the same check without Sphinx.

The settings page's table of every setting and its default is Markdown in the page
itself, so that the defaults show where the page is read as Markdown too; it is the
code's (a stale one is a warning, and fails ``test_docs.py``), and running this file
writes it again: ``python docs/_ext/increcrawl_reference.py``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from increcrawl_scrapy import stats
from increcrawl_scrapy.config import DEFAULTS

KINDS = ("setting", "stat")
_BLOCK = re.compile(r"^(?:```+|:::+)\{(setting|stat)\}\s+(\S+)\s*$", re.MULTILINE)
_DAY = 86_400
_MIB = 1024 * 1024


def known(kind: str) -> set[str]:
    """Every name of *kind* the code has."""
    return set(DEFAULTS) if kind == "setting" else set(stats.ALL_KEYS)


def documented_in(docs: Path) -> dict[str, set[str]]:
    """The names each ``{setting}`` / ``{stat}`` block of the pages under *docs* documents."""
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for page in docs.rglob("*.md"):
        if "_build" in page.parts:
            continue
        for kind, name in _BLOCK.findall(page.read_text(encoding="utf-8")):
            found[kind].add(name)
    return found


def problems(kind: str, documented: set[str]) -> list[str]:
    """What is wrong between the code's names of *kind* and the documented ones."""
    names = known(kind)
    return [f"{kind} {name} is not documented" for name in sorted(names - documented)] + [
        f"{kind} {name} is documented but the code has no such {kind}"
        for name in sorted(documented - names)
    ]


def shown_default(name: str) -> str:
    """A setting's default as a reader wants it: the value, and what a number means."""
    value = DEFAULTS[name]
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        return repr(list(value))
    if isinstance(value, bool) or not isinstance(value, int | float):
        return repr(value)
    number = int(value) if float(value).is_integer() else value
    if name.endswith(("_INTERVAL", "_SECONDS", "_TIMEOUT")) and number >= _DAY:
        days = number / _DAY
        return f"{number} ({days:g} {'day' if days == 1 else 'days'})"
    if name.endswith("_BYTES") and number >= _MIB:
        return f"{number} ({number / _MIB:g} MiB)"
    return str(number)


SETTINGS_PAGE = Path(__file__).resolve().parents[1] / "reference" / "settings.md"
TABLE_START = "<!-- The code's table: python docs/_ext/increcrawl_reference.py writes it. -->"
TABLE_END = "<!-- End of the table. -->"


def settings_table() -> str:
    """Every setting and its default, as a Markdown table (the settings page's)."""
    rows = ["| setting | default |", "| --- | --- |"]
    for name in sorted(DEFAULTS):
        default = shown_default(name).replace("|", "\\|")  # not a column's end
        rows.append(f"| {{setting}}`{name}` | `{default}` |")
    return "\n".join(rows) + "\n"


def table_in(page: str) -> str | None:
    """The table between the markers of *page*, or None."""
    start, end = page.find(TABLE_START), page.find(TABLE_END)
    if start < 0 or end < start:
        return None
    return page[start + len(TABLE_START) : end].strip("\n") + "\n"


def write_table(path: Path = SETTINGS_PAGE) -> bool:
    """Write the code's table into the settings page; whether it changed."""
    page = path.read_text(encoding="utf-8")
    found = table_in(page)
    if found is None:
        raise SystemExit(f"{path} has no {TABLE_START!r} ... {TABLE_END!r}")
    start, end = page.index(TABLE_START) + len(TABLE_START), page.index(TABLE_END)
    fresh = page[:start] + "\n" + settings_table() + page[end:]
    if fresh != page:
        path.write_text(fresh, encoding="utf-8")
    return fresh != page


def setup(app: Any) -> dict[str, Any]:
    from sphinx import addnodes
    from sphinx.util import logging

    logger = logging.getLogger(__name__)

    def parse(kind: str) -> Any:
        def parse_node(env: Any, sig: str, signode: Any) -> str:
            name = sig.strip()
            signode += addnodes.desc_name(name, name)
            if name not in known(kind):
                logger.warning(
                    "%s %s is documented but the code has no such %s",
                    kind,
                    name,
                    kind,
                    location=env.docname,
                )
            elif kind == "setting":
                default = f" = {shown_default(name)}"
                signode += addnodes.desc_annotation(default, default)
            return name

        return parse_node

    for kind in KINDS:
        app.add_object_type(kind, kind, indextemplate=f"pair: %s; {kind}", parse_node=parse(kind))

    def check(app: Any, env: Any) -> None:
        objects = env.get_domain("std").objects
        for kind in KINDS:
            documented = {name for (objtype, name) in objects if objtype == kind}
            for problem in problems(kind, documented):
                if "not documented" in problem:
                    logger.warning("%s (add a {%s} block to docs/reference/)", problem, kind)

    def stale_table(app: Any, env: Any) -> None:
        if table_in(SETTINGS_PAGE.read_text(encoding="utf-8")) != settings_table():
            logger.warning(
                "the settings table of %s is not the code's: run python "
                "docs/_ext/increcrawl_reference.py",
                SETTINGS_PAGE.name,
            )

    app.connect("env-check-consistency", check)
    app.connect("env-check-consistency", stale_table)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print("written" if write_table() else "already the code's")
