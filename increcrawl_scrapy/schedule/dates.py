"""What a host's sitemap dates have earned, and what a page's fetch says about them:
pure rules, read by the policy (``policy.py``) and the hosts' evidence
(``state/hosts.py``)."""

from __future__ import annotations

from increcrawl_scrapy.schedule.estimator import History, observe
from increcrawl_scrapy.schedule.rows import (
    NOISY,
    SAMPLED,
    STALE,
    TRUSTED,
    UNKNOWN,
    Outcome,
    PageState,
)

#: Moves that were changes, with nothing against them, that earn a host's dates
#: trust before INCRECRAWL_LASTMOD_MIN_EVIDENCE (two edits a day: the third read).
CLEAN_EVIDENCE = 4


def lastmod_verdict(
    moved_changed: float,
    moved_unchanged: float,
    unmoved_changed: float,
    min_evidence: int,
) -> str:
    """What a host's sitemap dates have earned from the fetches of its pages: a move
    that meant a change (precision), a change that came with a move (recall).
    ``unknown`` until *min_evidence* informative fetches (a move or a change), except
    that clean evidence (CLEAN_EVIDENCE moves that were changes, nothing against)
    earns trust early: an honest host settles within its first few sitemap reads,
    and the first move for nothing or unannounced change takes the trust back."""
    if moved_changed >= CLEAN_EVIDENCE and not moved_unchanged and not unmoved_changed:
        return TRUSTED
    if moved_changed + moved_unchanged + unmoved_changed < min_evidence:
        return UNKNOWN
    moves = moved_changed + moved_unchanged
    changes = moved_changed + unmoved_changed
    precision = moved_changed / moves if moves else 1.0
    recall = moved_changed / changes if changes else 1.0
    if precision < 0.5:
        return NOISY
    if recall < 0.5:
        return STALE
    return TRUSTED if precision >= 0.8 and recall >= 0.8 else UNKNOWN


def first_unannounced(page: PageState, outcome: Outcome) -> bool:
    """Whether this fetch finds the page's first change its date did not announce."""
    return (
        outcome is Outcome.CHANGED
        and not page.lastmod_moved
        and page.unannounced == 0
        and page.last_fetched is not None
    )


def sample_found_change(page: PageState, outcome: Outcome) -> bool:
    """Whether this fetch, asked by its trusted host's sample, finds a change its date
    did not announce, the fetch before having found none: evidence against the dates
    at once (held for a later fetch, a page that changes daily would be taken for
    noise and the stale dates never found out)."""
    return (
        page.sampled == SAMPLED
        and bool(page.sitemap_lastmod)
        and outcome is Outcome.CHANGED
        and not page.lastmod_moved
        and page.last_fetched is not None
        # Not a page that changes at every fetch (noise), whatever it did long ago.
        and not page.change_streak
    )


def unannounced(page: PageState, outcome: Outcome) -> int:
    """Changes of the page its sitemap date did not announce, this fetch included."""
    if outcome is Outcome.CHANGED and page.sitemap_lastmod and not page.lastmod_moved:
        return min(page.unannounced + 1, 1_000_000)
    return page.unannounced


def observed(page: PageState, outcome: Outcome, now: float, verdict: str) -> History:
    """The page's change history with this fetch added (a fetch that follows an
    earlier one is an observation: changed or not, after so long). A change its
    ``lastmod`` did not announce is noise, not a change, on a trusted host, and
    after the first on a host not judged stale: the page's schedule follows its
    dates."""
    history = History.decode(page.change_history, page.unchanged_time, page.observations)
    if page.last_fetched is None or outcome not in _OBSERVED:
        return history
    changed = outcome is Outcome.CHANGED
    unannounced = changed and page.sitemap_lastmod and not page.lastmod_moved
    # On a trusted host, noise; elsewhere, a page's second and later such changes are
    # its habit (volatile text the rules miss), unless the host's dates are known to
    # be stale: then they are its edits.
    if unannounced and (verdict == TRUSTED or (verdict != STALE and page.unannounced)):
        changed = False
    return observe(history, now - page.last_fetched, changed)


_OBSERVED = (Outcome.CHANGED, Outcome.UNCHANGED, Outcome.NOT_MODIFIED)
