"""A circuit breaker for the Geonode API, across all of a crawl's calls.

Retries are per call; when the API itself is down, every due page would spend
``GEONODE_MAX_RETRIES + 1`` attempts on it (hours for 50,000 pages). After
FAILURES_TO_OPEN failures in a row (transport errors, 5xx), no new request is sent
for a pause; then one call goes as a probe while the others wait for it. A probe
that fails doubles the pause; after PROBES failed probes the crawl ends with
``geonode_unreachable`` and every unfetched page stays due.

Once a call meets a fatal error (a refused first call, a bad key, a spent quota), the
breaker is stopped with it: every call queued or waiting here fails with the same
error at once, instead of each waiting out a pause while the run closes.
"""

from __future__ import annotations

import asyncio
import logging

from increcrawl_scrapy import close_reasons
from increcrawl_scrapy.geonode.errors import GeonodeFatalError

logger = logging.getLogger(__name__)

FAILURES_TO_OPEN = 10
PROBES = 3


class Breaker:
    def __init__(self, pause: float) -> None:
        self.pause = pause  # the first pause (seconds): GEONODE_BACKOFF_MAX
        self.failures = 0  # in a row, across calls
        self.failed_probes = 0
        self._open_until: float | None = None
        self._probing = False
        self._probed = asyncio.Event()
        self._stopped: GeonodeFatalError | None = None
        self._stop_event = asyncio.Event()

    @property
    def open(self) -> bool:
        return self._open_until is not None

    async def admit(self) -> None:
        """Wait until a request may be sent (at once while the circuit is closed)."""
        loop = asyncio.get_running_loop()
        self._raise_if_stopped()
        while self._open_until is not None:
            if self.failed_probes >= PROBES:
                raise GeonodeFatalError(
                    close_reasons.API_UNREACHABLE,
                    f"the Geonode API failed {self.failures} times in a row and "
                    f"{self.failed_probes} probes",
                )
            wait = self._open_until - loop.time()
            if wait > 0:
                await self.sleep(wait)
            elif not self._probing:
                self._probing = True  # this call is the probe
                self._probed.clear()
                return
            else:
                await self._probed.wait()
                self._raise_if_stopped()

    async def sleep(self, seconds: float) -> None:
        """Wait *seconds* (a pause, a retry's back-off); raises the stopping error at
        once if the breaker is stopped meanwhile."""
        self._raise_if_stopped()
        try:
            await asyncio.wait_for(self._stop_event.wait(), seconds)
        except asyncio.TimeoutError:
            return
        self._raise_if_stopped()

    def stop(self, error: GeonodeFatalError) -> None:
        """The run cannot use the API any more (*error*): every waiting and later call
        fails with it."""
        if self._stopped is None:
            self._stopped = error
            self._stop_event.set()
            self._probed.set()

    def _raise_if_stopped(self) -> None:
        if self._stopped is not None:
            raise GeonodeFatalError(self._stopped.reason, str(self._stopped))

    def succeeded(self) -> None:
        if self._open_until is not None:
            logger.info("The Geonode API answers again: sending work")
        self.failures = self.failed_probes = 0
        self._open_until = None
        self._end_probe()

    def down(self) -> str | None:
        """Why the API counts as down now (the circuit is open), or None."""
        if self._open_until is None:
            return None
        return (
            f"The Geonode API failed {self.failures} times in a row"
            + (f" and {self.failed_probes} probes" if self.failed_probes else "")
            + " and has not answered since"
        )

    def failed(self, weight: int = 1) -> None:
        """A transport error or a 5xx answer; *weight*: the pages it carried (a
        failed batch call counts as many failures as its pages would have)."""
        self.failures += weight
        now = asyncio.get_running_loop().time()
        if self._probing:
            self.failed_probes += 1
            self._open_until = now + self.pause * 2**self.failed_probes
            self._end_probe()
        elif self._open_until is None and self.failures >= FAILURES_TO_OPEN:
            self._open_until = now + self.pause
            logger.warning(
                "The Geonode API failed %d times in a row: no new work for %.1f s, then a "
                "probe (%d failed probes end the run with %s)",
                self.failures,
                self.pause,
                PROBES,
                close_reasons.API_UNREACHABLE,
            )

    def _end_probe(self) -> None:
        self._probing = False
        self._probed.set()
