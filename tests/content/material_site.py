"""Starlette's documentation, built by MkDocs + Material with Starlette's own template
overrides (``starlette_docs/``, from its sdist: real markup nobody here wrote).

Its ``partials/toc-item.html`` override writes a stray ``</li>`` for every entry of a
page's table of contents; browsers ignore it. Needs ``mkdocs`` and ``mkdocs-material``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("starlette_docs")


def material_available() -> bool:
    try:
        __import__("material")
    except ImportError:
        return False
    return True


class StarletteDocs:
    """The site's sources copied to *root*/src, built into *root*/out for *base_url*."""

    def __init__(self, root: Path, base_url: str) -> None:
        self.src, self.out, self.base_url = root / "src", root / "out", base_url
        shutil.copytree(SOURCE, self.src)
        config = self.src / "mkdocs.yml"
        config.write_text(config.read_text().replace("SITE_URL", f"{base_url}/"))

    def rename_nav_label(self, old: str, new: str) -> None:
        """A navigation-only edit: every page lists the label, no page's text has it."""
        config = self.src / "mkdocs.yml"
        text = config.read_text()
        assert f"- {old}:" in text, old
        config.write_text(text.replace(f"- {old}:", f"- {new}:"))

    def edit_page(self, name: str, line: str) -> None:
        page = self.src / "docs" / f"{name}.md"
        page.write_text(page.read_text() + f"\n{line}\n")

    def url_of(self, name: str) -> str:
        return f"{self.base_url}/" if name == "index" else f"{self.base_url}/{name}/"

    def urls(self) -> set[str]:
        return {self.url_of(page.stem) for page in (self.src / "docs").glob("*.md")}

    def build(self) -> None:
        shutil.rmtree(self.out, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(self.out)],
            cwd=self.src,
            check=True,
            capture_output=True,
            timeout=300,
            env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
        )
