"""Hybrid fetching's memory: per host, whether a free direct probe can tell an
unchanged page from a changed one, or its pages go straight to Geonode.

- ``probe`` (and ``unknown``, a host never judged): each page is probed first; an
  extraction is paid only when the probe says the page changed (new validators or a
  new direct fingerprint). Each extraction after a probe compares the two answers.
- ``extract``: direct answers are blocked (403/429/503, a challenge page, a
  JavaScript shell) or do not see what Geonode sees: pages are extracted without a
  probe until ``retry_at``, when one page probes again (the host's *scout*); the wait
  doubles while the host stays so, up to ``MAX_RETRY_FACTOR`` times the setting.

A host being judged (unknown, or due for a retry) sends one probe first and the
rest of its pages wait for the verdict, so a blocking host gets one request, not
one per page. Verdicts are kept in the state (``remember``: ``fetcher:HOST``), so
they hold across runs; what a host's pages hash is Geonode's text in either mode,
so a switch never reports a change.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass

from increcrawl_scrapy import compat

logger = logging.getLogger(__name__)

UNKNOWN, PROBE, EXTRACT = "unknown", "probe", "extract"
MAX_RETRY_FACTOR = 16
_NAME = "fetcher:{host}"


@dataclass
class HostFetcher:
    mode: str = UNKNOWN
    reason: str = ""  # why EXTRACT: blocked, challenge, shell, failed, differs
    retry_at: float = 0.0  # EXTRACT: when a probe is tried again
    wait: float = 0.0  # the last wait before a retry (doubles while it fails)
    agreed: int = 0  # comparisons where the probe saw what Geonode saw
    differed: int = 0


class HostFetchers:
    """The verdicts of one crawl's hosts; *remembered* / *remember* read and keep
    them in the state (called off the reactor's thread)."""

    def __init__(
        self,
        retry: float,
        clock: Callable[[], float],
        remembered: Callable[[str], str | None],
        remember: Callable[[str, str], None],
    ) -> None:
        self.retry = retry
        self.clock = clock
        self._remembered = remembered
        self._remember = remember
        self.hosts: dict[str, HostFetcher] = {}
        self.scouting: set[str] = set()  # hosts whose scout probe is out
        self.settled: set[str] = set()  # hosts judged this run (no more scouts)

    async def load(self, host: str) -> HostFetcher:
        known = self.hosts.get(host)
        if known is None:
            raw = await compat.in_thread(self._remembered, _NAME.format(host=host))
            known = self.hosts[host] = _parse(raw)
        return known

    def judging(self, host: str) -> bool:
        """Whether *host* needs a verdict this run before its pages are sent."""
        if host in self.settled:
            return False
        fetcher = self.hosts[host]
        return fetcher.mode == UNKNOWN or (
            fetcher.mode == EXTRACT and self.clock() >= fetcher.retry_at
        )

    def probes(self, host: str) -> bool:
        """Whether a page of *host* is probed before it is extracted."""
        fetcher = self.hosts[host]
        return fetcher.mode != EXTRACT or (host not in self.settled and self.judging(host))

    async def direct_sees(self, host: str, agreed: bool) -> None:
        """A probe answered the check (a 304, a gone page) or, with *agreed*, saw
        what Geonode sees."""
        fetcher = self.hosts[host]
        if agreed:
            fetcher.agreed += 1
        if fetcher.mode != PROBE:
            if fetcher.mode == EXTRACT:
                logger.info("%s: direct probes answer again; probing before extracting", host)
            fetcher.mode, fetcher.reason, fetcher.retry_at, fetcher.wait = PROBE, "", 0.0, 0.0
            await self._keep(host)
        self._settle(host)

    async def direct_fails(self, host: str, reason: str) -> None:
        """Direct answers are blocked, a shell, or not what Geonode sees (*reason*)."""
        fetcher = self.hosts[host]
        if reason == "differs":
            fetcher.differed += 1
        if fetcher.mode != EXTRACT or self.clock() >= fetcher.retry_at:
            again = fetcher.mode == EXTRACT
            fetcher.wait = (
                min(fetcher.wait * 2, self.retry * MAX_RETRY_FACTOR)
                if again and fetcher.wait
                else self.retry
            )
            fetcher.mode, fetcher.reason = EXTRACT, reason
            fetcher.retry_at = self.clock() + fetcher.wait
            logger.info(
                "%s: direct requests %s; pages go straight to Geonode, a probe is tried "
                "again in %.1f days",
                host,
                _SAID.get(reason, reason),
                fetcher.wait / 86400,
            )
            await self._keep(host)
        self._settle(host)

    def _settle(self, host: str) -> None:
        self.scouting.discard(host)
        self.settled.add(host)

    async def _keep(self, host: str) -> None:
        value = json.dumps(asdict(self.hosts[host]), sort_keys=True)
        await compat.in_thread(self._remember, _NAME.format(host=host), value)


_SAID = {
    "blocked": "are refused (403/429/503)",
    "challenge": "get a challenge page",
    "shell": "get a page only JavaScript fills",
    "failed": "fail",
    "differs": "do not see what Geonode sees",
}


def _parse(raw: str | None) -> HostFetcher:
    if not raw:
        return HostFetcher()
    try:
        values = json.loads(raw)
        return HostFetcher(**{k: v for k, v in values.items() if k in HostFetcher.__annotations__})
    except (ValueError, TypeError):
        return HostFetcher()  # unreadable: judged again
