"""A stand-in Geonode Scraper API on 127.0.0.1, built from the documented API.

It fetches loopback origins for real (forwarding the request's ``headers``), so
200/304/404/410 come from a real web server, turns HTML into markdown with the
same converter as direct mode, and can play every documented failure on demand::

    with GeonodeStandIn(api_keys=["k"], concurrency_limit=4) as api:
        api.inject("503", count=2)              # the next two extract calls fail
        api.inject("content_null")              # the origin's 200, its markdown null
        api.configure(origin_status_mode="error")
        ... crawl with GEONODE_API_URL=api.url, GEONODE_API_KEY="k" ...
        assert api.counters()["peak_concurrency"] <= 4

Run it alone with ``python -m increcrawl_scrapy.testing.geonode --port 0``.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import ipaddress
import json
import random
import re
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit, urlunsplit

from lxml import etree
from lxml import html as lxml_html

from increcrawl_scrapy.content.markdown import html_to_markdown
from increcrawl_scrapy.testing.api_shapes import (
    EXTRACTION_ERRORS,
    Validator,
    api_error,
    extraction_error,
    gateway_html,
    query_int,
)
from increcrawl_scrapy.testing.server import LoopbackServer, QuietHandler

ORIGIN_STATUS_MODES = ("metadata", "error")
HTTP_FAULTS = ("429", "500", "503", "502", "504", "408", "drop", "slow")
#: 200 answers that break the documented contract.
BAD_ANSWERS = ("not_json", "missing_fields", "wrong_types")
#: A documented answer, the origin's 200 in it, but the format asked for null or absent.
NO_CONTENT = ("content_null", "content_absent")
FAULT_KINDS = HTTP_FAULTS + BAD_ANSWERS + NO_CONTENT + tuple(EXTRACTION_ERRORS)
ENDPOINTS = ("extract", "extract_status", "batch", "batch_status", "batch_item", "map", "any")
_CONDITIONAL = ("if-none-match", "if-modified-since")
_REFUSED = -1  # _fetch_origin: the origin redirected off loopback


class _OffLoopback(urllib.error.URLError):
    """An origin redirected to an address that is not loopback."""


class _LoopbackRedirects(urllib.request.HTTPRedirectHandler):
    # The loopback-only rule holds for every hop, not only the first URL.
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def,unused-ignore]
        if not _is_loopback(newurl):
            raise _OffLoopback(f"redirect to {newurl} refused: not a loopback address")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}), _LoopbackRedirects())


@dataclass
class Knobs:
    """What the stand-in does; change with :meth:`GeonodeStandIn.configure`."""

    api_keys: tuple[str, ...] = ("test-key",)
    concurrency_limit: int = 10
    quota: int | None = None  # successful extractions allowed this month
    latency: float = 0.0  # seconds added to every extraction
    retry_after: float | None = None  # ``Retry-After`` on 429, or no header
    origin_status_mode: str = "metadata"  # how origin 304/404/410 are reported
    slow_seconds: float = 120.0  # how long a "slow" fault makes the client wait
    batch_stall: bool = False  # batch jobs stay "processing" until turned off
    batch_job_fails: bool = False  # finished jobs end "failed"; their done items stay readable
    batch_workers: int = 4
    batch_pages: str = "honest"  # or "repeat" / "skip": result pages that overlap or leave gaps
    map_extra_links: tuple[str, ...] = ()  # returned by /v1/map whatever the site has
    origin_timeout: float = 10.0


@dataclass
class _Fault:
    kind: str
    endpoint: str
    url: str | None = None  # only the calls for this page's URL, or any


@dataclass
class _Job:
    job_id: str
    kind: str  # "extract" or "batch"
    created_at: str
    config: dict[str, Any]
    items: list[dict[str, Any]]
    invalid_urls: list[str] = field(default_factory=list)
    polls: int = 0
    cancelled: bool = False
    completed_at: str | None = None


class GeonodeStandIn:
    """The stand-in API server. A context manager; ``url`` is its base URL."""

    def __init__(self, *, port: int = 0, seed: int = 0, **knobs: Any) -> None:
        self.knobs = Knobs()
        self._lock = threading.Condition()
        self._stopping = threading.Event()
        self._scripted: deque[_Fault] = deque()
        self._random_rate = 0.0
        self._random_kinds: tuple[str, ...] = ()
        self._random_endpoints: tuple[str, ...] = ("extract", "batch_item")
        self._rng = random.Random(seed)  # noqa: S311 - deterministic faults, not security
        self._jobs: dict[str, _Job] = {}
        self._in_flight = 0
        self._calls = 0  # HTTP calls being answered now
        self._reserved = 0  # quota held by sync extractions in progress
        self._reset_counters()
        self.configure(**knobs)
        self._port = port
        self._server: LoopbackServer | None = None  # bound on start()

    # -- lifecycle -----------------------------------------------------------

    @property
    def url(self) -> str:
        if self._server is None:
            raise RuntimeError("the stand-in is not started")
        return self._server.url

    def start(self) -> GeonodeStandIn:
        self._stopping.clear()
        self._server = LoopbackServer(_handler_for(self), self._port)
        self._server.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            self._lock.notify_all()
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> GeonodeStandIn:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- knobs and faults ----------------------------------------------------

    def configure(self, **knobs: Any) -> None:
        known = {f.name for f in fields(Knobs)}
        unknown = set(knobs) - known
        if unknown:
            raise ValueError(f"unknown knobs {sorted(unknown)}; known: {sorted(known)}")
        if knobs.get("origin_status_mode", "metadata") not in ORIGIN_STATUS_MODES:
            raise ValueError(f"origin_status_mode must be one of {ORIGIN_STATUS_MODES}")
        if "map_extra_links" in knobs:
            knobs["map_extra_links"] = tuple(knobs["map_extra_links"])
        if "api_keys" in knobs:
            keys = knobs["api_keys"]
            knobs["api_keys"] = (keys,) if isinstance(keys, str) else tuple(keys)
        with self._lock:
            for name, value in knobs.items():
                setattr(self.knobs, name, value)
            self._lock.notify_all()  # a raised limit or an unstalled batch frees waiters

    def inject(
        self, kind: str, count: int = 1, endpoint: str = "extract", url: str | None = None
    ) -> None:
        """The next *count* calls of *endpoint* (for page *url* only, if given: an
        extraction's) answer with fault *kind*."""
        _check_fault(kind, endpoint)
        with self._lock:
            self._scripted.extend(_Fault(kind, endpoint, url) for _ in range(count))

    def random_faults(
        self,
        rate: float,
        kinds: Iterable[str] = ("500", "503", "502", "429", "drop", "TIMEOUT"),
        *,
        seed: int = 0,
        endpoints: Iterable[str] = ("extract", "batch_item"),
    ) -> None:
        """Each call of *endpoints* fails with probability *rate*, kinds drawn
        from *kinds*, deterministically under *seed*."""
        kinds, endpoints = tuple(kinds), tuple(endpoints)
        for kind in kinds:
            for endpoint in endpoints:
                _check_fault(kind, endpoint)
        with self._lock:
            self._random_rate = rate
            self._random_kinds = kinds
            self._random_endpoints = endpoints
            self._rng = random.Random(seed)  # noqa: S311

    def clear_faults(self) -> None:
        with self._lock:
            self._scripted.clear()
            self._random_rate = 0.0

    def _next_fault(self, endpoint: str, url: str | None = None) -> str | None:
        with self._lock:
            for index, fault in enumerate(self._scripted):
                if fault.endpoint in (endpoint, "any") and fault.url in (None, url):
                    del self._scripted[index]
                    self._counters["faults"][fault.kind] += 1
                    return fault.kind
            if (
                self._random_rate
                and endpoint in self._random_endpoints
                and self._rng.random() < self._random_rate
            ):
                kind = self._rng.choice(self._random_kinds)
                self._counters["faults"][kind] += 1
                return kind
        return None

    # -- counters ------------------------------------------------------------

    def _reset_counters(self) -> None:
        self._counters: dict[str, Any] = {
            "requests": Counter(),
            "statuses": Counter(),
            "faults": Counter(),
            "tokens_charged": 0,
            "extractions": 0,
            "origin_fetches": 0,
            "conditional_requests": 0,
            "peak_concurrency": 0,
            "peak_calls": 0,  # HTTP calls being answered at once, any endpoint
            "bodies": deque(maxlen=200),
        }

    def reset_counters(self) -> None:
        with self._lock:
            self._reset_counters()

    def counters(self) -> dict[str, Any]:
        """A snapshot: requests per endpoint, statuses, tokens, peak concurrency..."""
        with self._lock:
            snapshot = {
                k: (dict(v) if isinstance(v, Counter) else list(v) if isinstance(v, deque) else v)
                for k, v in self._counters.items()
            }
            snapshot["in_flight"] = self._in_flight
            snapshot["quota_used"] = self._counters["extractions"]
        return snapshot

    def _call(self, change: int) -> None:
        with self._lock:
            self._calls += change
            self._counters["peak_calls"] = max(self._counters["peak_calls"], self._calls)

    def _count(self, key: str, body: Any = None) -> None:
        with self._lock:
            self._counters["requests"][key] += 1
            if body is not None:
                self._counters["bodies"].append({"endpoint": key, "body": body})

    # -- work slots ------------------------------------------------------------

    def _try_slot(self) -> bool:
        with self._lock:
            if self._in_flight >= self.knobs.concurrency_limit:
                return False
            self._take_slot()
            return True

    def _wait_slot(self, job: _Job | None = None) -> bool:
        with self._lock:
            while not self._stopping.is_set():
                stalled = job is not None and self.knobs.batch_stall
                if job is not None and job.cancelled:
                    return False
                if not stalled and self._in_flight < self.knobs.concurrency_limit:
                    self._take_slot()
                    return True
                self._lock.wait(0.1)
        return False

    def _take_slot(self) -> None:
        self._in_flight += 1
        peak = self._counters["peak_concurrency"]
        self._counters["peak_concurrency"] = max(peak, self._in_flight)

    def _release_slot(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._lock.notify_all()

    def _quota_left(self, reserve: bool = False) -> bool:
        """Whether the quota allows one more extraction; with *reserve*, hold a place
        for it (checked and taken at once, so parallel calls cannot overdraw)."""
        with self._lock:
            quota = self.knobs.quota
            left = quota is None or self._counters["extractions"] + self._reserved < quota
            if left and reserve:
                self._reserved += 1
            return left

    def _unreserve(self) -> None:
        with self._lock:
            self._reserved -= 1

    # -- extraction ----------------------------------------------------------

    def extract(self, url: str, config: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Fetch *url* for real; return the API status and body of a sync extract."""
        started = time.monotonic()
        if self.knobs.latency:
            self._stopping.wait(self.knobs.latency)
        headers = config.get("headers") or {}
        if not _is_loopback(url):
            return 422, extraction_error(
                "INVALID_URL", "the stand-in only fetches origins on loopback addresses"
            )
        status, body, final_url = self._fetch_origin(url, headers)
        if status == _REFUSED:
            return 422, extraction_error("INVALID_URL", body.decode())
        if status is None:
            return 422, extraction_error("NETWORK_ERROR", f"origin unreachable: {body!r}")
        if status >= 300 and self.knobs.origin_status_mode == "error":
            return 422, extraction_error(
                "UNPROCESSABLE_CONTENT",
                f"Origin responded with HTTP {status}",
                details={"http_status": str(status)},
            )
        formats = config["formats"]
        ok = 200 <= status < 300
        data = {
            "markdown": html_to_markdown(body) if ok and "markdown" in formats else None,
            "html": body.decode("utf-8", "replace") if ok and "html" in formats else None,
        }
        with self._lock:
            self._counters["tokens_charged"] += 1
            self._counters["extractions"] += 1
        metadata = {
            "url": final_url,  # where redirects ended
            "http_status": status,
            "duration_ms": int((time.monotonic() - started) * 1000),
            "render_js": config.get("render_js", False),
            "formats": formats,
            "processing_mode": config.get("processing_mode", "sync"),
            "proxy": config.get("proxy"),
            "headers": config.get("headers"),
            "wait_config": config.get("wait_config"),
        }
        return 200, {"data": data, "metadata": metadata, "tokens_charged": 1}

    def _fetch_origin(self, url: str, headers: dict[str, str]) -> tuple[int | None, bytes, str]:
        """(status or None, body, final URL) of the origin's answer."""
        with self._lock:
            self._counters["origin_fetches"] += 1
            if any(name.lower() in _CONDITIONAL for name in headers):
                self._counters["conditional_requests"] += 1
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 - http(s) checked
        try:
            with _NO_PROXY.open(request, timeout=self.knobs.origin_timeout) as answer:
                return answer.status, answer.read(), answer.geturl()
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read(), exc.geturl() or url
        except _OffLoopback as exc:
            return _REFUSED, str(exc.reason).encode(), url
        except (urllib.error.URLError, OSError) as exc:
            return None, str(exc).encode(), url

    # -- batch jobs ----------------------------------------------------------

    def _run_batch(self, job: _Job) -> None:
        pending = deque(range(len(job.items)))
        threads = [
            threading.Thread(target=self._batch_worker, args=(job, pending), daemon=True)
            for _ in range(max(1, self.knobs.batch_workers))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with self._lock:
            if job.completed_at is None:
                job.completed_at = _now()

    def _batch_worker(self, job: _Job, pending: deque[int]) -> None:
        while True:
            with self._lock:
                if not pending or job.cancelled:
                    return
                index = pending.popleft()
            if not self._wait_slot(job):
                return
            try:
                self._batch_item(job, job.items[index])
            finally:
                self._release_slot()

    def _batch_item(self, job: _Job, item: dict[str, Any]) -> None:
        with self._lock:
            if job.cancelled:
                return
            item["status"] = "processing"
        fault = self._next_fault("batch_item", item["url"])
        if fault in NO_CONTENT:
            fault, dropped = None, fault
        else:
            dropped = None
        if fault in EXTRACTION_ERRORS:
            self._fail_item(item, fault, "injected fault")
            return
        if fault is not None:  # transport faults inside a batch surface as errors
            self._fail_item(item, "INTERNAL_ERROR", f"injected {fault}")
            return
        status, body = self.extract(item["url"], job.config)
        if dropped:
            _drop_content(body, job.config["formats"], dropped)
        with self._lock:
            if status == 200:
                meta = body["metadata"]
                item.update(
                    url=meta["url"],  # the final URL, as a real API may answer
                    status="completed",
                    data=body["data"],
                    metadata={
                        "http_status": meta["http_status"],
                        "duration_ms": meta["duration_ms"],
                        "tokens_charged": 1,
                    },
                )
            else:
                error = body["error"]
                item.update(
                    status="failed",
                    error_code=error["code"],
                    error_message=error["message"],
                    metadata={"http_status": None, "duration_ms": 0, "tokens_charged": 0},
                )

    def _fail_item(self, item: dict[str, Any], code: str, message: str) -> None:
        with self._lock:
            item.update(
                status="failed",
                error_code=code,
                error_message=message,
                metadata={"http_status": None, "duration_ms": 0, "tokens_charged": 0},
            )

    def batch_status(self, job: _Job, page: int, page_size: int) -> dict[str, Any]:
        with self._lock:
            job.polls += 1
            tally = Counter(item["status"] for item in job.items)
            terminal = tally["completed"] + tally["failed"] + tally["cancelled"]
            if job.cancelled:
                status = "cancelled"
            elif job.polls == 1:
                status = "queued"  # every job is seen queued, then processing, then done
            elif job.polls > 2 and terminal == len(job.items) and job.completed_at is not None:
                status = "failed" if self.knobs.batch_job_fails else "completed"
            else:
                status = "processing"
            start = (page - 1) * page_size
            if self.knobs.batch_pages == "repeat":
                start = max(0, start - page_size // 2)  # each page repeats half the last
            elif self.knobs.batch_pages == "skip":
                start += page_size // 2  # and here half of each page goes missing
            results = [dict(item) for item in job.items[start : start + page_size]]
            charged = sum((i.get("metadata") or {}).get("tokens_charged") or 0 for i in job.items)
            return {
                "job_id": job.job_id,
                "status": status,
                "batch_config": job.config,
                "token_summary": {
                    "tokens_charged_total": charged,
                    "tokens_reserved": len(job.items) - terminal,
                },
                "total_urls": len(job.items),
                "completed_urls": tally["completed"],
                "failed_urls": tally["failed"],
                "cancelled_urls": tally["cancelled"],
                "pending_urls": len(job.items) - terminal,
                "invalid_urls": job.invalid_urls,
                "created_at": job.created_at,
                "completed_at": job.completed_at if status == "completed" else None,
                "results": results,
            }

    # -- map -----------------------------------------------------------------

    def map_site(self, url: str, search: str | None, subdomains: bool, no_query: bool) -> list:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        base = f"{parts.scheme}://{parts.netloc}"
        found: dict[str, str] = {}
        for link in self._sitemap_links(base):
            found.setdefault(link, "sitemap")
        status, page, _final = self._fetch_origin(url, {})
        if status == 200:
            tree = lxml_html.fromstring(page or b"<html/>")
            for href in tree.xpath("//a/@href"):
                found.setdefault(urljoin(url, str(href)), "html")
        links = []
        seen: set[str] = set()
        for link, source in found.items():
            link_parts = urlsplit(link)
            link_host = (link_parts.hostname or "").lower()
            if link_parts.scheme not in ("http", "https"):
                continue
            if link_host != host and not (subdomains and link_host.endswith("." + host)):
                continue
            if no_query:
                link = urlunsplit(link_parts._replace(query="", fragment=""))
            if search and search.lower() not in link.lower():
                continue
            if link not in seen:
                seen.add(link)
                links.append({"url": link, "source": source})
        return links

    def _sitemap_links(self, base: str) -> list[str]:
        status, robots, _final = self._fetch_origin(f"{base}/robots.txt", {})
        sitemaps = []
        if status == 200:
            for line in robots.decode("utf-8", "replace").splitlines():
                if line.lower().startswith("sitemap:"):
                    sitemaps.append(line.split(":", 1)[1].strip())
        if not sitemaps:
            sitemaps = [f"{base}/sitemap.xml"]
        links: list[str] = []
        queue, visited = list(sitemaps), set[str]()
        while queue and len(visited) < 50:
            sitemap = queue.pop(0)
            if sitemap in visited or not _is_loopback(sitemap):
                continue
            visited.add(sitemap)
            status, body, _final = self._fetch_origin(sitemap, {})
            if status != 200:
                continue
            if body[:2] == b"\x1f\x8b":
                body = gzip.decompress(body)
            try:
                root = etree.fromstring(body, parser=etree.XMLParser(resolve_entities=False))
            except etree.XMLSyntaxError:
                continue
            locs = [str(t).strip() for t in root.xpath("//*[local-name()='loc']/text()")]
            if etree.QName(root).localname == "sitemapindex":
                queue.extend(locs)
            else:
                links.extend(locs)
        return links


def _check_fault(kind: str, endpoint: str) -> None:
    if kind not in FAULT_KINDS:
        raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULT_KINDS)}")
    if endpoint not in ENDPOINTS:
        raise ValueError(f"unknown endpoint {endpoint!r}; known: {', '.join(ENDPOINTS)}")
    if kind in NO_CONTENT and endpoint not in ("extract", "batch_item"):
        raise ValueError(f"{kind} is a fault of an extraction's answer only")


def _drop_content(answer: dict[str, Any], formats: list[str], kind: str) -> None:
    """*answer* (a documented one) without the *formats* asked for: null or absent."""
    data = answer.get("data")
    if not isinstance(data, dict):
        return
    for name in formats:
        if kind == "content_null":
            data[name] = None
        else:
            data.pop(name, None)


def _is_loopback(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return False
    host = (parts.hostname or "").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


_JOB_PATH = re.compile(r"^/v1/(extract|batch)/([0-9a-fA-F-]{1,64})$")


class _Handler(QuietHandler):
    """The stand-in's HTTP side: one method per endpoint (``get_*``, ``post_*``,
    ``delete_*``, ``admin_*``), each answering for :attr:`api`, the stand-in it serves
    (set on a subclass per server, :func:`_handler_for`)."""

    api: GeonodeStandIn
    #: A fault that drops the content of this request's answer (``NO_CONTENT``).
    no_content: str | None = None

    def handle_one_request(self) -> None:
        if self.api._stopping.is_set():  # stopped: answer nothing, like a dead server
            self.close_connection = True
            return
        self._answering = False
        try:
            super().handle_one_request()
        finally:
            if self._answering:
                self.api._call(-1)

    def parse_request(self) -> bool:
        # A request has arrived (not an idle keep-alive wait): count it in flight.
        parsed = super().parse_request()
        if parsed:
            self._answering = True
            self.api._call(+1)
        return parsed

    # -- routes ----------------------------------------------------------------

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        if path.startswith("/_admin/"):
            self.admin_get(path)
            return
        self.api._count(f"GET {_route(path)}")
        if path == "/health":
            self.get_health()
            return
        if not self.authorized():
            return
        match = _JOB_PATH.match(path)
        if path == "/v1/usage/concurrency":
            self.get_concurrency()
        elif match and match.group(1) == "extract":
            self.get_extract_job(match.group(2))
        elif match:
            self.get_batch_job(match.group(2), parse_qs(parts.query))
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        if path.startswith("/_admin/"):
            self.admin_post(path)
            return
        ok, body = self.read_json()
        self.api._count(f"POST {path}", body if ok else None)
        if not self.authorized():
            return
        if not ok:
            self.send_json(422, body)
            return
        if path == "/v1/extract":
            self.post_extract(body)
        elif path == "/v1/batch":
            self.post_batch(body)
        elif path == "/v1/map":
            self.post_map(body)
        else:
            self.send_json(404, {"detail": "Not Found"})

    def do_DELETE(self) -> None:
        path = urlsplit(self.path).path
        self.api._count(f"DELETE {_route(path)}")
        if not self.authorized():
            return
        match = _JOB_PATH.match(path)
        self.delete_batch(match.group(2) if match and match.group(1) == "batch" else None)

    # -- GET /health, /v1/usage/concurrency, /v1/extract/{id}, /v1/batch/{id} ----

    def get_health(self) -> None:
        self.send_json(
            200,
            {"service": "scraper", "status": "ok", "timestamp": _now(), "version": "stand-in"},
        )

    def get_concurrency(self) -> None:
        with self.api._lock:
            body = {
                "work_concurrency_in_use": self.api._in_flight,
                "work_concurrency_limit": self.api.knobs.concurrency_limit,
            }
        self.send_json(200, body)

    def get_extract_job(self, job_id: str) -> None:
        job = self.job_asked("extract", job_id)
        if job is None:
            return
        item = job.items[0]
        with self.api._lock:
            job.polls += 1
            done = item["status"] in ("completed", "failed")
            # Every job is seen queued first, as the batch lifecycle is.
            status = "queued" if job.polls == 1 else item["status"]
            done = done and status != "queued"
        body: dict[str, Any] = {
            "job_id": job.job_id,
            "status": status,
            "created_at": job.created_at,
            "completed_at": job.completed_at if done else None,
            "data": None,
            "metadata": None,
            "error": None,
            "tokens_charged": None,
        }
        if status == "completed":
            body.update(data=item["data"], metadata=item["full_metadata"], tokens_charged=1)
        elif status == "failed":
            body.update(error=item["error"], tokens_charged=0)
        self.send_json(200, body)

    def get_batch_job(self, job_id: str, query: dict[str, list[str]]) -> None:
        job = self.job_asked("batch", job_id)
        if job is None:
            return
        detail: list[dict[str, Any]] = []
        page = query_int(detail, "page", _first(query, "page"), 1, 1, 10**9)
        size = query_int(detail, "page_size", _first(query, "page_size"), 10, 1, 50)
        if detail:
            self.send_json(422, {"detail": detail})
            return
        self.send_json(200, self.api.batch_status(job, page, size))

    def job_asked(self, kind: str, job_id: str) -> _Job | None:
        """The job a status call names, or ``None`` once a fault or a 404 answered."""
        if self.play_fault(f"{kind}_status"):
            return None
        job = self.api._jobs.get(job_id)
        if job is None or job.kind != kind:
            self.send_json(404, api_error("NOT_FOUND", f"job {job_id} not found", retryable=False))
            return None
        return job

    # -- POST /v1/extract, /v1/batch, /v1/map -------------------------------------

    def post_extract(self, body: Any) -> None:
        check = Validator(body)
        url = check.required_str("url")
        config = {
            "formats": check.formats(["html"]),
            "render_js": check.boolean("render_js", False),
            "processing_mode": check.choice("processing_mode", ("sync", "async"), "sync"),
            "headers": check.headers(),
            "timeout": check.integer("timeout", None, ge=1000),
            "proxy": check.proxy(),
            "wait_config": check.wait_config(),
        }
        if check.detail:
            self.send_json(422, check.body_dict())
            return
        self.no_content = None
        if self.play_fault("extract", url):
            return
        assert url is not None
        if config["processing_mode"] == "async":
            if self.quota_ok():
                self.start_async(url, config)
            return
        if not self.quota_ok(reserve=True):
            return
        api = self.api
        try:
            if not api._try_slot():
                self.too_busy(
                    "WORK_CONCURRENCY_LIMITED", "Work concurrency limit reached for this plan"
                )
                return
            try:
                status, answer = api.extract(url, config)
            finally:
                api._release_slot()
        finally:
            api._unreserve()
        if self.no_content:
            formats = config["formats"]
            assert isinstance(formats, list)
            _drop_content(answer, formats, self.no_content)
        self.send_json(status, answer)

    def start_async(self, url: str, config: dict[str, Any]) -> None:
        api = self.api
        job_id = str(uuid.uuid4())
        item: dict[str, Any] = {"url": url, "status": "queued"}
        job = _Job(job_id, "extract", _now(), config, [item])
        api._jobs[job_id] = job

        def work() -> None:
            if not api._wait_slot():
                return
            try:
                with api._lock:
                    item["status"] = "processing"
                status, answer = api.extract(url, config)
            finally:
                api._release_slot()
            with api._lock:
                if status == 200:
                    item.update(
                        status="completed",
                        data=answer["data"],
                        full_metadata=answer["metadata"],
                    )
                else:
                    item.update(status="failed", error=answer["error"])
                job.completed_at = _now()

        threading.Thread(target=work, daemon=True).start()
        self.send_json(
            202,
            {
                "job_id": job_id,
                "status": "queued",
                "status_url": f"/v1/extract/{job_id}",
                "estimated_tokens": 1,
            },
        )

    def post_batch(self, body: Any) -> None:
        check = Validator(body)
        urls = check.url_list("urls", min_length=1, max_length=1000)
        ignore_invalid = check.boolean("ignore_invalid_urls", True)
        config = {
            "formats": check.formats(["markdown"]),
            "render_js": check.boolean("render_js", False),
            "proxy": check.proxy() or {"country": None, "type": "residential"},
            "headers": check.headers(),
            "wait_config": check.wait_config(),
        }
        invalid = [
            u
            for u in urls
            if urlsplit(u).scheme not in ("http", "https") or not urlsplit(u).hostname
        ]
        if invalid and not ignore_invalid:
            for u in invalid:
                check.fail(["urls", urls.index(u)], "url_parsing", "Input should be a valid URL", u)
        if check.detail:
            self.send_json(422, check.body_dict())
            return
        if self.play_fault("batch") or not self.quota_ok():
            return
        accepted = [u for u in urls if u not in invalid]
        job_id = str(uuid.uuid4())
        items = [
            {
                "input_index": i,
                "url": u,
                "status": "queued",
                "error_code": None,
                "error_message": None,
                "data": None,
                "metadata": None,
            }
            for i, u in enumerate(accepted)
        ]
        job = _Job(job_id, "batch", _now(), config, items, invalid_urls=invalid)
        self.api._jobs[job_id] = job
        threading.Thread(target=self.api._run_batch, args=(job,), daemon=True).start()
        self.send_json(
            202,
            {
                "job_id": job_id,
                "status": "queued",
                "status_url": f"/v1/batch/{job_id}",
                "accepted_urls": len(accepted),
                "invalid_urls": invalid,
            },
        )

    def post_map(self, body: Any) -> None:
        check = Validator(body)
        url = check.required_str("url")
        search = check.string("search")
        subdomains = check.boolean("include_subdomains", False)
        no_query = check.boolean("ignore_query_parameters", True)
        if check.detail:
            self.send_json(422, check.body_dict())
            return
        if self.play_fault("map"):
            return
        assert url is not None
        if not _is_loopback(url):
            self.send_json(
                422,
                extraction_error(
                    "INVALID_URL", "the stand-in only maps origins on loopback addresses"
                ),
            )
            return
        started = time.monotonic()
        links = self.api.map_site(url, search, subdomains, no_query)
        links += [{"url": link, "source": "html"} for link in self.api.knobs.map_extra_links]
        self.send_json(
            200,
            {
                "success": True,
                "links": links,
                "metadata": {
                    "url": url,
                    "links_count": len(links),
                    "duration_ms": int((time.monotonic() - started) * 1000),
                },
                "warning": None if links else "No links found for this URL",
            },
        )

    # -- DELETE /v1/batch/{id} ----------------------------------------------------

    def delete_batch(self, job_id: str | None) -> None:
        api = self.api
        job = api._jobs.get(job_id) if job_id is not None else None
        if job is None:
            self.send_json(404, api_error("NOT_FOUND", "job not found", retryable=False))
            return
        with api._lock:
            terminal = all(i["status"] in ("completed", "failed", "cancelled") for i in job.items)
            if job.cancelled or (terminal and job.completed_at is not None):
                conflict = True
            else:
                conflict = False
                job.cancelled = True
                in_flight = 0
                for item in job.items:
                    if item["status"] == "queued":
                        item["status"] = "cancelled"
                    elif item["status"] == "processing":
                        in_flight += 1
                job.completed_at = _now()
                api._lock.notify_all()
        if conflict:
            self.send_json(409, api_error("CONFLICT", "job already finished", retryable=False))
            return
        self.send_json(
            202,
            {
                "job_id": job.job_id,
                "status": "cancelled",
                "status_url": f"/v1/batch/{job.job_id}",
                "in_flight_urls": in_flight,
            },
        )

    # -- /_admin/: the stand-in steered over HTTP -------------------------------

    def admin_get(self, path: str) -> None:
        if path == "/_admin/counters":
            self.send_body(200, json.dumps(self.api.counters()).encode(), "application/json")
        elif path == "/_admin/knobs":
            self.send_body(200, json.dumps(asdict(self.api.knobs)).encode(), "application/json")
        else:
            self.send_body(404, b"{}", "application/json")

    def admin_post(self, path: str) -> None:
        ok, body = self.read_json()
        steer = {
            "/_admin/knobs": self.admin_knobs,
            "/_admin/faults": self.admin_faults,
            "/_admin/clear-faults": lambda _: self.api.clear_faults(),
            "/_admin/reset-counters": lambda _: self.api.reset_counters(),
        }
        try:
            if not ok or not isinstance(body, dict):
                raise ValueError("body must be a JSON object")
            if path not in steer:
                self.send_body(404, b"{}", "application/json")
                return
            steer[path](body)
        except (TypeError, ValueError) as exc:
            self.send_body(400, json.dumps({"error": str(exc)}).encode(), "application/json")
            return
        self.send_body(200, json.dumps({"ok": True}).encode(), "application/json")

    def admin_knobs(self, body: dict[str, Any]) -> None:
        self.api.configure(**body)

    def admin_faults(self, body: dict[str, Any]) -> None:
        if "rate" in body:
            self.api.random_faults(**body)
        else:
            self.api.inject(**body)

    # -- the answers' parts ------------------------------------------------------

    def send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        with self.api._lock:
            self.api._counters["statuses"][str(status)] += 1
        self.send_body(status, json.dumps(body).encode(), "application/json", headers)

    def read_json(self) -> tuple[bool, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return True, json.loads(raw or b"null")
        except ValueError as exc:
            return False, {
                "detail": [
                    {
                        "type": "json_invalid",
                        "loc": ["body", 0],
                        "msg": "JSON decode error",
                        "input": {},
                        "ctx": {"error": str(exc)},
                    }
                ]
            }

    def authorized(self) -> bool:
        key = self.headers.get("X-Api-Key")
        if key and key in self.api.knobs.api_keys:
            return True
        self.send_json(
            401, api_error("AUTH_REQUIRED", "Invalid or missing API key", retryable=False)
        )
        return False

    def play_fault(self, endpoint: str, url: str | None = None) -> bool:
        """Answer with the next fault for *endpoint* (and page *url*), if there is one."""
        api = self.api
        kind = api._next_fault(endpoint, url)
        if kind is None:
            return False
        if kind == "drop":
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return True
        if kind in BAD_ANSWERS:
            body = {
                "not_json": b"<html>surprise</html>",
                "missing_fields": b'{"data": {"markdown": "# x"}}',
                "wrong_types": b'{"data": {"markdown": 5}, "metadata": {"http_status": "200"},'
                b' "tokens_charged": "1"}',
            }[kind]
            self.send_body(200, body, "application/json")
            return True
        if kind == "slow":
            api._stopping.wait(api.knobs.slow_seconds)
            return False  # then answer normally, too late for the client
        if kind in NO_CONTENT:
            self.no_content = kind  # an answer made as usual, its content dropped
            return False
        if kind in ("502", "504"):
            with api._lock:
                api._counters["statuses"][kind] += 1
            self.send_body(int(kind), gateway_html(int(kind)), "text/html")
        elif kind == "429":
            self.too_busy("RATE_LIMITED", "Rate limit exceeded")
        elif kind in ("500", "503", "408"):
            code = {"500": "INTERNAL_ERROR", "503": "SERVICE_UNAVAILABLE", "408": "TIMEOUT"}[kind]
            self.send_json(int(kind), api_error(code, f"injected {kind}", retryable=True))
        else:
            self.send_json(422, extraction_error(kind, f"injected {kind}"))
        return True

    def too_busy(self, code: str, message: str) -> None:
        headers = {}
        if self.api.knobs.retry_after is not None:
            headers["Retry-After"] = f"{self.api.knobs.retry_after:g}"
        details = {"limit": self.api.knobs.concurrency_limit}
        self.send_json(429, api_error(code, message, retryable=True, details=details), headers)

    def quota_ok(self, reserve: bool = False) -> bool:
        if self.api._quota_left(reserve):
            return True
        self.send_json(
            402, api_error("PAYMENT_REQUIRED", "Monthly quota exhausted", retryable=False)
        )
        return False


def _handler_for(api: GeonodeStandIn) -> type[_Handler]:
    """The handler class of one server: :class:`_Handler` answering for *api*."""
    return type("Handler", (_Handler,), {"api": api})


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _route(path: str) -> str:
    match = _JOB_PATH.match(path)
    return f"/v1/{match.group(1)}/{{job_id}}" if match else path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Stand-in Geonode Scraper API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS pick (default)")
    parser.add_argument("--key", action="append", dest="keys", help="accepted API key")
    parser.add_argument("--concurrency-limit", type=int, default=10)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--origin-status-mode", choices=ORIGIN_STATUS_MODES, default="metadata")
    args = parser.parse_args(argv)
    api = GeonodeStandIn(
        port=args.port,
        api_keys=tuple(args.keys or ("test-key",)),
        concurrency_limit=args.concurrency_limit,
        latency=args.latency,
        origin_status_mode=args.origin_status_mode,
    )
    api.start()
    print(api.url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        api.stop()


if __name__ == "__main__":
    main()
