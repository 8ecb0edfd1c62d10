"""An asyncio client for the Geonode Scraper API, used from inside the crawl.

API-level failures are retried here (429, 5xx, ``retryable: true``, transport
errors) with exponential backoff and jitter, honouring ``Retry-After``; site-level
outcomes are left to Scrapy. At most ``GEONODE_CONCURRENCY`` calls are in flight.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

import aiohttp
from scrapy import signals

from increcrawl_scrapy import close_reasons, compat
from increcrawl_scrapy import stats as keys
from increcrawl_scrapy.config import IncrecrawlConfig, config_for
from increcrawl_scrapy.geonode.breaker import Breaker
from increcrawl_scrapy.geonode.errors import (
    GeonodeApiError,
    GeonodeBadAnswer,
    GeonodeFatalError,
    GeonodeRetriesExhausted,
)
from increcrawl_scrapy.geonode.slots import Slots

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector

    from increcrawl_scrapy.geonode.reservations import Reservations

logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
FATAL_STATUSES = {401: "geonode_bad_key", 402: "geonode_quota_exhausted"}
_MAX_RETRY_AFTER = 300.0


def client_for(crawler: Crawler) -> GeonodeClient:
    """The crawl's one client, shared by the middleware and the spider, so that
    ``GEONODE_CONCURRENCY`` bounds every API call of the crawl together. Closed
    when the engine stops (after the spider's own shutdown calls)."""
    kept = compat.kept_of_crawl(crawler)
    client: GeonodeClient | None = kept.get("geonode_client")
    if client is None:
        client = kept["geonode_client"] = GeonodeClient(config_for(crawler), crawler.stats)
        compat.connect_for_crawl(crawler, client.close, signals.engine_stopped)
    return client


class GeonodeClient:
    def __init__(
        self,
        config: IncrecrawlConfig,
        stats: StatsCollector | None = None,
        *,
        rng: random.Random | None = None,
    ) -> None:
        if not config.api_key:
            raise ValueError("GeonodeClient needs GEONODE_API_KEY")
        self.config = config
        self.stats = stats
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not security
        self._session: aiohttp.ClientSession | None = None
        self._slots: Slots | None = None
        # The API's own timeout covers queue wait and the fetch; give it room to answer.
        self._timeout = aiohttp.ClientTimeout(total=config.timeout_ms / 1000 + 5)
        self._breaker = Breaker(config.backoff_max)
        self._answered = False  # whether the API ever answered this crawl
        #: Where calls that may spend tokens reserve them first (None: not reserved).
        self.reservations: Reservations | None = None

    @property
    def breaker(self) -> Breaker:
        """The circuit breaker across the crawl's calls."""
        return self._breaker

    # -- the documented calls ------------------------------------------------

    async def extract(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self.call("POST", "/v1/extract", body, spends=1)
        _require(answer, "metadata", dict)
        return answer

    async def reserve(self, pages: int) -> int:
        """Reserve in the state what fetching *pages* may cost, before the call that
        fetches them is sent (``reservations.py``): the tokens reserved."""
        return await self.reservations.reserve(pages) if self.reservations is not None else 0

    def settle(self, reserved: int, pages: int = 0, charged: int = 0) -> None:
        """The call *reserved* for answered, charging *charged* for *pages*."""
        if self.reservations is not None:
            self.reservations.settle(reserved, pages, charged)

    async def submit_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = await self.call("POST", "/v1/batch", body)
        _require(answer, "job_id", str)
        keys.inc(self.stats, keys.API_BATCH_JOBS)
        return answer

    async def batch_status(self, job_id: str, page: int = 1, page_size: int = 50) -> dict[str, Any]:
        answer = await self.call(
            "GET", f"/v1/batch/{job_id}", params={"page": page, "page_size": page_size}
        )
        _require(answer, "status", str)
        return answer

    async def cancel_batch(self, job_id: str) -> None:
        try:
            await self.call("DELETE", f"/v1/batch/{job_id}")
        except GeonodeApiError as exc:
            if exc.status != 409:  # already finished: nothing to cancel
                raise

    async def adopt_plan_concurrency(self) -> int:
        """With GEONODE_CONCURRENCY unset, take the plan's work-concurrency limit
        (``GET /v1/usage/concurrency``); the calls in flight at once, logged."""
        self._ensure_session()
        assert self._slots is not None
        if not self.config.concurrency_from_plan:
            return self._slots.limit
        limit = await self.plan_limit()
        if limit is None:
            logger.warning(
                "Could not read the plan's concurrency: %d calls at once (set GEONODE_CONCURRENCY)",
                self._slots.limit,
            )
            return self._slots.limit
        await self._slots.resize(limit)
        logger.info("GEONODE_CONCURRENCY from the plan: %d calls at once", limit)
        return limit

    async def plan_limit(self) -> int | None:
        """The plan's work-concurrency limit (``GET /v1/usage/concurrency``), or None."""
        try:
            usage = await self.call("GET", "/v1/usage/concurrency")
        except (GeonodeBadAnswer, GeonodeRetriesExhausted, GeonodeApiError) as exc:
            logger.debug("No plan concurrency: %s", exc)
            return None
        limit = usage.get("work_concurrency_limit")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            return None
        return limit

    @property
    def limit(self) -> int:
        """The calls this crawl makes at once."""
        self._ensure_session()
        assert self._slots is not None
        return self._slots.limit

    async def share(self, limit: int) -> None:
        """Make at most *limit* calls at once from now on (this crawl's share of the
        plan when several crawls use it: cluster_share.py)."""
        self._ensure_session()
        assert self._slots is not None
        await self._slots.resize(limit)

    async def map(self, url: str) -> list[str]:
        answer = await self.call("POST", "/v1/map", {"url": url})
        links = answer.get("links")
        if links is None:
            links = []
        if not isinstance(links, list):
            raise GeonodeBadAnswer("map answer has no list of links")
        found = []
        for link in links:
            value = link.get("url") if isinstance(link, dict) else None
            if isinstance(value, str):
                found.append(value)
        if answer.get("warning"):
            logger.warning("Geonode map of %s: %s", url, answer["warning"])
        return found

    # -- transport -----------------------------------------------------------

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _ensure_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                base_url=self.config.api_url + "/",
                headers={"X-Api-Key": self.config.api_key or ""},
                timeout=self._timeout,
                # The slots bound the calls (their number may change during the run).
                connector=aiohttp.TCPConnector(limit=0),
            )
        if self._slots is None:
            self._slots = Slots(self.config.concurrency)
        return self._session

    async def call(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        *,
        spends: int = 0,
    ) -> dict[str, Any]:
        """One API call with retries; returns the JSON object of a 2xx answer. One
        that may spend tokens for *spends* pages reserves them first (``reserve``)."""
        attempt = 0
        while True:
            try:
                retry_after, problem = await self._attempt(method, path, body, params, spends)
            except GeonodeFatalError as exc:
                self._breaker.stop(exc)  # the calls queued behind this one fail with it
                raise
            if isinstance(problem, dict):
                return problem
            if attempt >= self.config.max_retries:
                raise GeonodeRetriesExhausted(
                    f"{method} {path} failed after {attempt + 1} attempts: {problem}",
                    code=problem.partition(" ")[2] or None if problem[:3].isdigit() else None,
                )
            delay = self._delay(attempt, retry_after)
            attempt += 1
            keys.inc(self.stats, keys.API_RETRIES)
            keys.inc(self.stats, keys.API_BACKOFF_MS, round(delay * 1000))
            logger.debug(
                "Geonode %s %s: %s; retry %d in %.2fs", method, path, problem, attempt, delay
            )
            await self._breaker.sleep(delay)

    async def _attempt(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None,
        params: dict[str, Any] | None,
        spends: int = 0,
    ) -> tuple[float | None, dict[str, Any] | str]:
        """One try. Returns ``(retry_after, json)`` on success or ``(retry_after,
        reason)`` for a retryable failure; raises for final ones. A call that may
        spend tokens for *spends* pages reserves them before it is sent."""
        session = self._ensure_session()
        assert self._slots is not None
        reserved = charged = 0
        try:
            async with self._slots.one():
                # Judged with a slot in hand: calls queued for a slot while the API went
                # down must not all be sent when their turn comes.
                await self._breaker.admit()
                # With a slot in hand: a call waiting for its turn reserves nothing.
                reserved = await self.reserve(spends) if spends else 0
                keys.inc(self.stats, keys.API_REQUESTS)
                try:
                    # Never follow a redirect: it would carry X-Api-Key to another host.
                    async with session.request(
                        method, path.lstrip("/"), json=body, params=params, allow_redirects=False
                    ) as answer:
                        status = answer.status
                        raw = await answer.read()
                        retry_after = _retry_after(answer.headers.get("Retry-After"))
                except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
                    error: BaseException | None = exc
                else:
                    error = None
            if error is not None:
                keys.inc(self.stats, keys.API_TRANSPORT_ERRORS)
                self._breaker.failed()
                if not self._answered and isinstance(error, aiohttp.ClientConnectorError):
                    # Refused or not resolved on the crawl's first call: a wrong URL or an
                    # API that is not there; retrying for minutes helps no one.
                    raise GeonodeFatalError(
                        close_reasons.API_UNREACHABLE,
                        f"the Geonode API at {self.config.api_url} cannot be reached "
                        f"({_connect_error(error)}); check GEONODE_API_URL",
                    )
                return None, f"transport error {type(error).__name__}"
            self._answered = True
            if status >= 500:
                self._breaker.failed()
            else:
                self._breaker.succeeded()  # whatever it says, the API is there
            keys.inc(self.stats, keys.API_STATUS, code=status)
            logger.debug("Geonode %s %s -> %s", method, path, status)
            if 300 <= status < 400:
                location = answer.headers.get("Location", "no Location")
                raise GeonodeApiError(
                    status, "REDIRECT", f"the API redirected to {location}; not followed"
                )
            parsed = _json(raw)
            if 200 <= status < 300:
                if not isinstance(parsed, dict):
                    raise GeonodeBadAnswer(
                        f"{method} {path} answered {status} without a JSON object"
                    )
                charged = _tokens(parsed)
                if charged:
                    keys.inc(self.stats, keys.API_TOKENS, charged)
                return retry_after, parsed
            if status in FATAL_STATUSES:
                raise GeonodeFatalError(
                    FATAL_STATUSES[status], f"Geonode API answered {status} to {method} {path}"
                )
            code, message, retryable = _error_fields(parsed)
            if status == 429 and code == "WORK_CONCURRENCY_LIMITED" and self._slots.limit > 1:
                # The plan allows fewer calls at once than we send: send fewer, for good.
                await self._slots.resize(self._slots.limit - 1)
                logger.warning(
                    "The Geonode API refused work over the plan's concurrency: %d calls at "
                    "once from now on",
                    self._slots.limit,
                )
            if retryable is None:
                retryable = status in RETRY_STATUSES
            if retryable:
                return retry_after, f"{status} {code or ''}".strip()
            raise GeonodeApiError(status, code, message or _snippet(raw), parsed)
        finally:
            self.settle(reserved, spends, charged)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, _MAX_RETRY_AFTER)
        ceiling = min(self.config.backoff_max, self.config.backoff_base * 2**attempt)
        return ceiling * self._rng.uniform(0.5, 1.0)


def _connect_error(error: aiohttp.ClientConnectorError) -> str:
    """'connection refused', 'name not known'...: the OS's words, not aiohttp's."""
    cause = error.os_error
    number = getattr(cause, "errno", None)
    words = os.strerror(number) if isinstance(number, int) and number > 0 else str(cause)
    return f"{words.lower()} for {error.host}:{error.port}"


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def _error_fields(parsed: Any) -> tuple[str | None, str | None, bool | None]:
    """(code, message, retryable) from any of the three documented error shapes."""
    if not isinstance(parsed, dict):
        return None, None, None  # e.g. a gateway's HTML page
    error = parsed.get("error")
    source: dict[str, Any] = error if isinstance(error, dict) else parsed
    code = source.get("code")
    message = source.get("message")
    retryable = source.get("retryable")
    if "detail" in parsed and code is None:
        return "VALIDATION_ERROR", json.dumps(parsed["detail"])[:500], False
    return (
        code if isinstance(code, str) else None,
        message if isinstance(message, str) else None,
        retryable if isinstance(retryable, bool) else None,
    )


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, (moment - datetime.now(timezone.utc)).total_seconds())


def _snippet(raw: bytes) -> str:
    return raw[:200].decode("utf-8", "replace")


def _require(answer: dict[str, Any], name: str, kind: type) -> None:
    if not isinstance(answer.get(name), kind):
        raise GeonodeBadAnswer(f"answer has no {name!r} of type {kind.__name__}")


def _tokens(answer: dict[str, Any]) -> int:
    """The answer's ``tokens_charged``, 0 when it says none (or nonsense)."""
    tokens = answer.get("tokens_charged")
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0 else 0
