"""Soft 404s: a site that answers 200 with its "not found" page for pages it no longer has.

Learned per run by asking the seed's site once for a path that cannot exist: if it
answers 200, the text of that answer is the site's "not found" page, and any page
whose text is the same (the URLs asked left out, since such pages often repeat them)
is ``gone``, not ``new`` or ``changed``.
"""

from __future__ import annotations

import json
import secrets
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

from increcrawl_scrapy.content.fingerprint import content_fingerprint

#: Request meta marking the probe (it is not a page of the state).
META_PROBE = "increcrawl_not_found_probe"


def probe_url(origin: str) -> str:
    """A URL of *origin* that no site has (random, per run)."""
    return f"{origin.rstrip('/')}/increcrawl-{secrets.token_hex(8)}-not-found"


class NotFound(NamedTuple):
    """A site's "not found" page: its text, and the URL it answered."""

    text: str
    url: str
    #: A verdict an older version kept: the fingerprint of its text less its URL.
    legacy: str = ""

    def dumps(self) -> str:
        return json.dumps({"text": self.text, "url": self.url})

    @classmethod
    def loads(cls, value: str | None) -> NotFound | None:
        """What ``dumps`` kept; None for nothing (or a verdict of an older version,
        kept as a fingerprint: the next probe learns again)."""
        if value and len(value) == 64 and not value.startswith("{"):
            return cls("", "", legacy=value)  # until the next probe that is answered
        try:
            found = json.loads(value or "")
            return cls(str(found["text"]), str(found["url"]))
        except (ValueError, TypeError, KeyError):
            return None

    def answers(self, text: str, url: str) -> bool:
        """Whether *text*, the answer of *url*, is this page. Both URLs are left out
        of both texts: such pages repeat the requested URL, and their navigation
        may link to the page that is gone."""
        if self.legacy:
            return _without(text, url) == self.legacy
        return _without(text, url, self.url) == _without(self.text, self.url, url)


def _without(text: str, *urls: str) -> str:
    spellings: set[str] = set()
    for url in filter(None, urls):
        path = urlsplit(url).path
        spellings.update((url, unquote(url), path, unquote(path)))
    for spelling in sorted(spellings, key=len, reverse=True):
        if len(spelling) > 1:
            text = text.replace(spelling, "")
    return content_fingerprint(text)
