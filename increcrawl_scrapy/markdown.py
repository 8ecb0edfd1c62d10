"""HTML to markdown, the same way for direct fetches and the stand-in API.

Both fetch paths must hash the same kind of text, so this is the only place
that turns HTML into markdown.
"""

from __future__ import annotations

from bs4 import BeautifulSoup
from markdownify import MarkdownConverter

# Elements whose text is never page content.
_INVISIBLE = ("script", "style", "noscript", "template", "head")

_CONVERTER = MarkdownConverter(
    heading_style="ATX",  # "## Related posts", which the volatile rules recognise
    bullets="-",
    escape_underscores=False,  # keep ``csrf_token=...`` recognisable
    escape_asterisks=False,
    escape_misc=False,
)


def html_to_markdown(html: str | bytes) -> str:
    """Markdown of the visible content of an HTML document."""
    soup = BeautifulSoup(html, "lxml")
    for element in soup(_INVISIBLE):
        element.decompose()
    return _CONVERTER.convert_soup(soup).strip() + "\n"
