"""Whether a direct answer is the page or a wall in front of it: a bot challenge, or
an empty shell that only JavaScript fills. Hybrid fetching pays for an extraction
then (``spiders/hybrid_fetch.py``). Pure functions; the shell check parses HTML, so
it runs on the content thread."""

from __future__ import annotations

import re

from lxml.etree import ParserError

from increcrawl_scrapy.content.parse import parse_html

#: Statuses of a direct answer that mean "not to you": the page is asked of Geonode.
BLOCKED_STATUSES = frozenset({403, 429, 503})
#: The titles of the usual bot walls (Cloudflare, captchas): the page is the wall.
_CHALLENGE_TITLE = re.compile(
    rb"(?i)<title>\s*(?:just a moment|attention required|access denied|are you a robot"
    rb"|verify you are human)"
)
#: What a wall says in its own text.
_CHALLENGE_TEXT = re.compile(
    r"(?i)checking (?:your browser|if the site connection is secure)|verify you are human"
    r"|enable javascript and cookies to continue|are you a robot"
)
#: A challenge's own form (Cloudflare's ``cf-chl-`` widget and options). Not the
#: ``challenge-platform`` script of JavaScript Detections, which sites carry on every
#: normal page: a script is not what a page shows.
_CHALLENGE_FORM = re.compile(rb"(?i)cf-chl-|_cf_chl_opt")
#: A challenge page is small; a long page that mentions a captcha is a page.
_CHALLENGE_BYTES = 64 * 1024
#: A page whose own text is longer than this is the page, whatever scripts it carries.
_CHALLENGE_TEXT_CHARS = 600
#: A body with scripts whose visible text is shorter than this is a shell.
SHELL_CHARS = 40
_INVISIBLE = ("script", "style", "noscript", "template", "head")


def is_challenge(body: bytes, text: str | None) -> bool:
    """Whether a 200's *body* is a bot wall: its main content (*text*, the page's
    own) is the challenge, not a page that carries a challenge's script."""
    if len(body) > _CHALLENGE_BYTES:
        return False
    own = len("".join((text or "").split()))
    if own > _CHALLENGE_TEXT_CHARS:
        return False
    if _CHALLENGE_TITLE.search(body) is not None:
        return True
    if text and _CHALLENGE_TEXT.search(text) is not None:
        return True
    return own < SHELL_CHARS and _CHALLENGE_FORM.search(body) is not None


def is_shell(body: bytes) -> bool:
    """An HTML page with scripts and (nearly) no text of its own: what a browser
    shows only once the scripts ran."""
    if b"<script" not in body.lower():
        return False
    try:
        document = parse_html(body).root  # as a browser shows it
    except (ParserError, ValueError):
        return False
    for element in list(document.iter(*_INVISIBLE)):
        element.drop_tree()
    text = " ".join(document.text_content().split())
    return len(text) < SHELL_CHARS
