"""Whether a direct answer is the page or a wall in front of it: a bot challenge, or
an empty shell that only JavaScript fills. Hybrid fetching pays for an extraction
then (``spiders/hybrid_fetch.py``). Pure functions; the shell check parses HTML, so
it runs on the content thread."""

from __future__ import annotations

import re

from lxml import html as lxml_html
from lxml.etree import ParserError

#: Statuses of a direct answer that mean "not to you": the page is asked of Geonode.
BLOCKED_STATUSES = frozenset({403, 429, 503})
#: The marks of the usual bot walls (Cloudflare, captchas), looked for in a short body.
_CHALLENGE = re.compile(
    rb"(?i)cf-chl-|challenge-platform|<title>\s*(?:just a moment|attention required"
    rb"|access denied|are you a robot|verify you are human)"
)
#: A challenge page is small; a long page that mentions a captcha is a page.
_CHALLENGE_BYTES = 64 * 1024
#: A body with scripts whose visible text is shorter than this is a shell.
SHELL_CHARS = 40
_INVISIBLE = ("script", "style", "noscript", "template", "head")


def is_challenge(body: bytes) -> bool:
    return len(body) <= _CHALLENGE_BYTES and _CHALLENGE.search(body) is not None


def is_shell(body: bytes) -> bool:
    """An HTML page with scripts and (nearly) no text of its own: what a browser
    shows only once the scripts ran."""
    if b"<script" not in body.lower():
        return False
    try:
        document = lxml_html.document_fromstring(body)
    except (ParserError, ValueError):
        return False
    for element in list(document.iter(*_INVISIBLE)):
        element.drop_tree()
    text = " ".join(document.text_content().split())
    return len(text) < SHELL_CHARS
