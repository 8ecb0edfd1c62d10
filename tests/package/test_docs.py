"""The documentation: its references cover the code's settings and stats keys, the
README stays a landing page whose links lead into the docs, and its test command is
the one CI runs. (.ci/run builds the site itself with warnings as errors.)"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


def _reference():
    spec = importlib.util.spec_from_file_location(
        "increcrawl_reference", DOCS / "_ext" / "increcrawl_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _reference()


@pytest.mark.parametrize("kind", reference.KINDS)
def test_every_setting_and_stats_key_is_documented(kind: str) -> None:
    documented = reference.documented_in(DOCS)[kind]
    assert reference.problems(kind, documented) == []


def test_the_check_sees_what_is_missing_and_what_is_unknown(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```{setting} INCRECRAWL_DB\nThe state.\n```\n\n```{stat} no/such\nx\n```\n")
    documented = reference.documented_in(tmp_path)
    assert documented == {"setting": {"INCRECRAWL_DB"}, "stat": {"no/such"}}
    missing = reference.problems("setting", documented["setting"])
    assert "setting INCRECRAWL_DB is not documented" not in missing
    assert "setting INCRECRAWL_MAX_FETCHES is not documented" in missing
    assert reference.problems("stat", {"no/such"})[-1] == (
        "stat no/such is documented but the code has no such stat"
    )


def test_defaults_are_shown_from_the_code() -> None:
    assert reference.shown_default("INCRECRAWL_DB") == "'crawl_state.sqlite'"
    assert reference.shown_default("INCRECRAWL_MAX_INTERVAL") == "2592000 (30 days)"
    assert reference.shown_default("INCRECRAWL_DEFAULT_INTERVAL") == "86400 (1 day)"
    assert reference.shown_default("INCRECRAWL_MAX_PAGE_BYTES") == "10485760 (10 MiB)"
    assert reference.shown_default("GEONODE_API_KEY") == "unset"
    assert reference.shown_default("INCRECRAWL_ALLOW") == "[]"


def test_the_defaults_are_in_the_markdown_itself() -> None:
    """Read as Markdown (on a forge, in an editor), the settings page shows every
    default: the blocks' signatures show them only in the built site. The table is
    the code's (``python docs/_ext/increcrawl_reference.py`` writes it again)."""
    page = (DOCS / "reference" / "settings.md").read_text()
    table = reference.settings_table()
    assert reference.table_in(page) == table, "python docs/_ext/increcrawl_reference.py"
    rows = [line for line in table.splitlines() if line.startswith("| {setting}")]
    assert len(rows) == len(reference.known("setting"))
    assert "| {setting}`INCRECRAWL_MAX_INTERVAL` | `2592000 (30 days)` |" in rows
    assert "| {setting}`GEONODE_API_KEY` | `unset` |" in rows


def test_a_stale_table_is_seen() -> None:
    page = (DOCS / "reference" / "settings.md").read_text()
    stale = page.replace("`2592000 (30 days)`", "`1 (0 days)`")
    assert reference.table_in(stale) != reference.settings_table()
    assert reference.table_in("no table") is None


def test_the_readme_is_a_landing_page() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for question in (
        "What counts as a change?",
        "How soon does an edit show up?",
        "What does Geonode cost?",
        "What does skipping do?",
    ):
        assert question in readme
    # Supported versions near the top.
    assert "Scrapy 2.13 or later" in "\n".join(readme.splitlines()[:15])


def test_the_readme_links_lead_to_files_that_exist() -> None:
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert local, "the README links into the docs"
    assert [link for link in local if not (REPO / link).exists()] == []


def test_every_docs_page_is_in_the_site() -> None:
    index = (DOCS / "index.md").read_text()
    pages = {
        path.relative_to(DOCS).with_suffix("").as_posix()
        for path in DOCS.rglob("*.md")
        if "_build" not in path.parts and path.name != "index.md"
    }
    assert {page for page in pages if f"\n{page}\n" not in index} == set()


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    marker = ci.index("# The README's test command:")
    command = ci[marker + 1].strip()
    readme = (REPO / "README.md").read_text()
    assert re.search(rf"^{re.escape(command)}(\s|$)", readme, re.MULTILINE), command
