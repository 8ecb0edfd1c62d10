"""Pages a rule took out of comparison, per host: aliases (``rel=canonical``), soft
404s, challenge pages, texts taken from the whole body (no main content found). Each
rule is checked against the page's content before it fires; when one still fires on
more than ``WARN_SHARE`` of a host's checked pages it is said in one line (a warning
at the run's end, so in the run summary too; ``status`` and the report), not only
counted: a rule firing on a whole site is likelier a wrong guess than a fact.

Counted per run and stored with it (``runs.hidden``, JSON ``{host: {rule: n,
"checked": n}}``). Not counted here: 304s and trusted sitemap dates, the ordinary ways
of not fetching a page again, verified otherwise (validators are kept only with the
fingerprint of their own answer; a trusted host's sample checks its dates).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping

from increcrawl_scrapy.urls import host_of

ALIAS, SOFT_404, CHALLENGE, WHOLE = "alias", "soft_404", "challenge", "whole"
#: What each rule did to the pages it fired on, as the warning says it.
SAID = {
    ALIAS: "are aliases of another page (rel=canonical, the same text): not reported",
    SOFT_404: 'answered with the site\'s "not found" page: gone',
    CHALLENGE: "answered direct requests with a challenge page: extracted, a token each",
    WHOLE: "mark no main content: their text is the whole body, the site's template in it",
}
#: A rule is said once it fires on more than this share of a host's checked pages.
WARN_SHARE = 0.05
CHECKED = "checked"


class HiddenPages:
    """One crawl's counts (on the reactor's thread)."""

    def __init__(self) -> None:
        self.hosts: dict[str, Counter[str]] = {}
        #: Pages whose text was taken from the whole body, until their result is
        #: recorded (a hybrid page's text is taken twice, probe and extraction).
        self._whole: set[str] = set()

    def taken_whole(self, url: str) -> None:
        self._whole.add(url)

    def checked(self, url: str) -> None:
        """A page of *url*'s host answered (its result recorded), its text taken
        from the whole body or not."""
        counts = self._of(url)
        counts[CHECKED] += 1
        if url in self._whole:
            self._whole.discard(url)
            counts[WHOLE] += 1

    def fired(self, rule: str, url: str) -> None:
        assert rule in SAID, rule
        self._of(url)[rule] += 1

    def _of(self, url: str) -> Counter[str]:
        return self.hosts.setdefault(host_of(url.lower()), Counter())

    def dumps(self) -> str | None:
        fired = {
            host: dict(counts)
            for host, counts in sorted(self.hosts.items())
            if set(counts) - {CHECKED}
        }
        return json.dumps(fired, sort_keys=True) if fired else None

    def warnings(self) -> list[str]:
        return warnings(self.hosts)


def loads(value: str | None) -> dict[str, dict[str, int]]:
    """A run's stored counts (none before schema 10)."""
    try:
        found = json.loads(value or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def warnings(hidden: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per host and rule that fired on more than WARN_SHARE of the host's
    checked pages."""
    lines = []
    for host, counts in sorted(hidden.items()):
        checked = max(int(counts.get(CHECKED, 0)), 1)
        for rule, said in SAID.items():
            fired = int(counts.get(rule, 0))
            if fired and fired > WARN_SHARE * checked:
                share = min(fired / checked, 1.0)
                lines.append(f"{host}: {fired:,} of {checked:,} pages checked ({share:.0%}) {said}")
    return lines
