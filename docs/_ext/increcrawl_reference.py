"""The settings and stats references, tied to the code.

``{setting} NAME`` and ``{stat} KEY`` blocks (MyST directives) document one setting or
stats key each. The signature of a setting shows its default as ``config.DEFAULTS``
has it, so a changed default changes the page; a name the code does not know, or a
name of the code no page documents, is a warning (an error under ``sphinx-build -W``,
as ``.ci/run`` builds). ``tests/package/test_docs.py`` runs the same check without Sphinx.
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
        return f"{number} ({number / _DAY:g} days)"
    if name.endswith("_BYTES") and number >= _MIB:
        return f"{number} ({number / _MIB:g} MiB)"
    return str(number)


def setup(app: Any) -> dict[str, Any]:
    from docutils import nodes
    from docutils.parsers.rst import Directive
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

    class SettingsTable(Directive):
        """``{settings-table}``: every setting with its default, each linked to its entry."""

        def run(self) -> list[Any]:
            table = nodes.table()
            group = nodes.tgroup(cols=2)
            table += group
            group += [nodes.colspec(colwidth=1), nodes.colspec(colwidth=1)]
            head = nodes.thead()
            head += nodes.row(
                "", *(nodes.entry("", nodes.paragraph(text=t)) for t in ("setting", "default"))
            )
            body = nodes.tbody()
            for name in sorted(DEFAULTS):
                ref = addnodes.pending_xref(
                    "", refdomain="std", reftype="setting", reftarget=name, refexplicit=False
                )
                ref += nodes.literal(name, name)
                body += nodes.row(
                    "",
                    nodes.entry("", nodes.paragraph("", "", ref)),
                    nodes.entry(
                        "", nodes.paragraph("", "", nodes.literal(text=shown_default(name)))
                    ),
                )
            group += [head, body]
            return [table]

    app.add_directive("settings-table", SettingsTable)
    app.connect("env-check-consistency", check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
