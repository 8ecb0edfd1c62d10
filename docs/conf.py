"""Sphinx configuration of the documentation site (``sphinx-build -W docs docs/_build``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "increcrawl-scrapy"
author = "the increcrawl-scrapy developers"
# The version being documented is the tree's, whatever copy is installed.
_pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text(encoding="utf-8")
release = re.search(r'^version = "([^"]+)"', _pyproject, re.MULTILINE)[1]
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "increcrawl_reference",  # settings and stats references, checked against the code
]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3  # links to a page's sections by their titles' slugs
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "README.md"]
suppress_warnings: list[str] = []

html_theme = "furo"
html_title = f"increcrawl-scrapy {release}"
html_static_path: list[str] = []
