"""Soft 404s: a site that answers 200 with its "not found" page for pages it no longer has.

Learned per run by asking the seed's site once for a path that cannot exist: if it
answers 200, the text of that answer (the requested URL and path left out, since
such pages often repeat them) is the site's "not found" page, and any page whose
text is the same is ``gone``, not ``new`` or ``changed``.
"""

from __future__ import annotations

import secrets
from urllib.parse import unquote, urlsplit

from increcrawl_scrapy.content.fingerprint import content_fingerprint

#: Request meta marking the probe (it is not a page of the state).
META_PROBE = "increcrawl_not_found_probe"


def probe_url(origin: str) -> str:
    """A URL of *origin* that no site has (random, per run)."""
    return f"{origin.rstrip('/')}/increcrawl-{secrets.token_hex(8)}-not-found"


def not_found_fingerprint(text: str, url: str) -> str:
    """The fingerprint of a page's *text* with its own *url* left out."""
    path = urlsplit(url).path
    for spelling in sorted({url, unquote(url), path, unquote(path)}, key=len, reverse=True):
        if len(spelling) > 1:
            text = text.replace(spelling, "")
    return content_fingerprint(text)
