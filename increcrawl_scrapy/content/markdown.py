"""HTML to markdown, the same way for direct fetches and the stand-in API.

Both fetch paths must hash the same kind of text, so this is the only place
that turns HTML into markdown. The converter is html-to-markdown (a Rust core):
measured on the throughput benchmark's pages it takes 0.04 ms where markdownify
over BeautifulSoup took 0.66 ms, and 0.11 ms against 3.4 ms for a whole page.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from html_to_markdown import ConversionOptions, InvalidInputError, PreprocessingOptions, convert

# Faithful conversion: which part of the page is content is decided before this
# (content/main.py), so the converter's own clean-up (navigation, forms) is off;
# the head's metadata is not page text.
_OPTIONS = ConversionOptions(
    heading_style="atx",  # "## Related posts", which the volatile rules recognise
    bullets="-",
    escape_underscores=False,  # keep ``csrf_token=...`` recognisable
    escape_asterisks=False,
    escape_misc=False,
    extract_metadata=False,
    preprocessing=PreprocessingOptions(enabled=False),
)


def _converter() -> Callable[[str], Any]:
    """``convert(html, _OPTIONS)``, with the options made into the Rust core's once:
    ``convert`` remakes them on every call, in Python (0.13 ms of a page's 0.2, with
    the GIL held). The library's own ``convert`` if its inner parts ever move."""
    try:
        from html_to_markdown import _html_to_markdown as core
        from html_to_markdown.api import _to_rust_conversion_options

        options = _to_rust_conversion_options(_OPTIONS)
        core.convert(html="<p>x</p>", options=options, visitor=None)
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another version
        return lambda html: convert(html, _OPTIONS)
    return lambda html: core.convert(html=html, options=options, visitor=None)


_convert = _converter()
#: Control characters browsers show as nothing (tab and line ends aside).
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def html_to_markdown(html: str | bytes) -> str:
    """Markdown of the visible content of an HTML document."""
    if isinstance(html, bytes):
        html = html.decode("utf-8", "replace")
    try:
        converted = _convert(html)
    except InvalidInputError:
        # "Binary data" to the converter: runs of control bytes a browser shows as
        # nothing. Dropped here only, so no other page's text moves.
        converted = _convert(_CONTROLS.sub("", html))
    return (converted.content or "").strip() + "\n"
