"""A page's content work in a process of its own (``INCRECRAWL_CONTENT_WORKER =
"process"``, the default).

Parsing, extraction, conversion and the fingerprint take about 0.2 ms of CPU a page.
On a thread they still hold the GIL most of that time, and every hand-back costs the
reactor's thread a switch: measured beside Scrapy's SitemapSpider
(``benchmarks/content_throughput.py``), a thread cost the crawl a second of wall
time per 3,000 pages, a second process next to nothing. The process is started once
per Python process, on first use, and reused by every crawl in it.

The reactor never waits on it: jobs and answers are length-prefixed pickles on the
child's stdin and stdout (``crawl/content_child.py``), written through the reactor's
own buffered transport. The child answers in the order asked, so when it dies (a
crash in a parser, an out-of-memory kill) the oldest page it held is the one it was
working on: that page fails with :class:`ContentWorkerLost`, a site failure that
backs off, and the others are asked again of a new one. A page that takes longer than
``INCRECRAWL_CONTENT_TIMEOUT`` (a parser in an endless loop) has the child killed the
same way, and fails with :class:`ContentTimeout`. A child that ends before it
is ready costs no page; after three such starts in a row (a frozen application, an
interpreter that cannot import this package) the content thread takes the work.
What the child writes on stderr (a library's warning, a crash's traceback) is logged
by the crawl, line by line: with ``LOG_FILE`` (a Scrapyd job's log) it is where the
crawl's own lines are.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import sys
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urljoin

from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future
from scrapy.utils.response import get_base_url
from twisted.internet import defer, protocol
from w3lib.url import canonicalize_url

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.content.page_text import ContentOptions, PageText, UnusablePage, page_text
from increcrawl_scrapy.crawl.content_child import BOOTSTRAP, HEADER, MAX_FRAME, READY, frame

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
#: How long the reactor's shutdown waits for the child to end after its stdin closes.
_STOP_WAIT = 5.0
_REAP_EVERY = 0.02
#: A line the child writes on stderr longer than this is logged in pieces.
_LINE_LIMIT = 16_384


class ContentWorkerLost(UnusablePage):
    """The content process ended while working on this page: a site failure, counted
    and backed off like any unusable page, never a crash of the crawl."""

    stat = stats.CONTENT_WORKER_LOST


class ContentTimeout(ContentWorkerLost):
    """Its text took longer than INCRECRAWL_CONTENT_TIMEOUT: the process was killed."""

    stat = stats.CONTENT_TIMEOUT


def response_text(response: Response, options: ContentOptions) -> PageText:
    """The page's text, whoever fetched it, so both paths hash the same text: decoded
    the way Scrapy decodes it (header, BOM, meta, then detection). CPU work."""
    text = response.text if isinstance(response, TextResponse) else None
    value = response.headers.get("Content-Type")
    return page_text(response.body, value.decode("latin-1") if value else None, text, options)


#: What the child needs to make the response again: its class, URL, body,
#: Content-Type and the encoding it was given (the rest never decides its text).
Shipped = tuple[type[Response], str, bytes, bytes | None, str | None]
#: Scrapy's classes, most specific first: a subclass of a user's ships as its base.
_KINDS = (HtmlResponse, XmlResponse, TextResponse, Response)


def shipped(response: Response) -> Shipped:
    kind = next(k for k in _KINDS if isinstance(response, k))
    encoding = getattr(response, "_encoding", None) if kind is not Response else None
    return kind, response.url, response.body, response.headers.get("Content-Type"), encoding


def shipped_text(page: Shipped, options: ContentOptions) -> PageText:
    """The text of a shipped page, made a response again."""
    return response_text(_unshipped(page), options)


def _unshipped(page: Shipped) -> Response:
    kind, url, body, content_type, encoding = page
    headers = {"Content-Type": content_type} if content_type else None
    extra: dict[str, Any] = {"encoding": encoding} if encoding else {}
    return kind(url, body=body, headers=headers, **extra)


def main_links(response: Response, options: ContentOptions) -> frozenset[str] | None:
    """The links of *response*'s main content, by the rules of its text
    (``page_text``), as canonical absolute URLs; None when its text has no main
    content to tell them by (not HTML, the whole page, an unusable body)."""
    try:
        found = response_text(response, options)
    except UnusablePage:
        return None
    if found.links is None:
        return None
    base = get_base_url(response) if isinstance(response, TextResponse) else response.url
    links = set()
    for href in found.links:
        with contextlib.suppress(ValueError):
            links.add(canonicalize_url(urljoin(base, href)))
    return frozenset(links)


def shipped_links(page: Shipped, options: ContentOptions) -> frozenset[str] | None:
    """The same of a shipped page, in the content process."""
    return main_links(_unshipped(page), options)


def with_print(
    fingerprint: bool, take: Callable[..., PageText], *args: Any
) -> tuple[PageText, str | None]:
    """A page's text by *take*, with its fingerprint when asked (the default rules
    are linear: taken with the text, they spare the reactor's thread)."""
    found = take(*args)
    return found, content_fingerprint(found.text) if fingerprint else None


class _Worker(protocol.ProcessProtocol):
    """The parent's side: jobs out on the child's stdin, answers in on its stdout."""

    def __init__(self) -> None:
        #: job -> (its answer, function, args, timeout), in the order asked: the
        #: child's order.
        self.waiting: dict[int, tuple[defer.Deferred[Any], Callable[..., Any], tuple, float]] = {}
        self.inbox = bytearray()
        self.said = bytearray()  # what it wrote on stderr, up to a line's end
        self.next_id = 0
        self.alive = True
        self.ready = False  # it said so, once its modules were imported
        self.reaped: defer.Deferred[None] = defer.Deferred()
        self.trigger: Any = None  # its "before shutdown" trigger
        self.stopping = False  # the reactor is shutting down: nothing is asked again
        self._killer: Any = None
        self._watch: Any = None  # the oldest job's timeout (a DelayedCall)

    def submit(
        self,
        function: Callable[..., Any],
        args: tuple[Any, ...],
        answer: defer.Deferred[Any],
        timeout: float = 0.0,
    ) -> None:
        data = frame(self.next_id + 1, (function, args))  # raises before anything waits
        self.next_id += 1
        self.waiting[self.next_id] = (answer, function, args, timeout)
        if len(self.waiting) == 1 and self.ready:
            self._watch_oldest()
        self._child().write(data)  # buffered: never blocks

    def _watch_oldest(self) -> None:
        """Time the oldest job: the one the child is working on, since it answered
        the one before (or since it was asked, or the child ready, if later). Not
        before it is ready: a slow start is no page that took too long."""
        if self._watch is not None and self._watch.active():
            self._watch.cancel()
        self._watch = None
        if not self.alive or not self.waiting:
            return
        job = next(iter(self.waiting))
        timeout = self.waiting[job][3]
        if timeout:
            self._watch = _reactor().callLater(timeout, self._overdue, job, timeout)

    def _overdue(self, job: int, timeout: float) -> None:
        # Its answer may be in the pipe, unread: a reactor that runs timers before it
        # reads (EPoll, select) reads it within the next turn.
        self._watch = _reactor().callLater(0, self._overdue_now, job, timeout)

    def _overdue_now(self, job: int, timeout: float) -> None:
        self._watch = None
        if not self.alive or job not in self.waiting:
            return
        logger.error(
            "A page's text took more than %g s in the content process "
            "(INCRECRAWL_CONTENT_TIMEOUT): it is killed, the page fails, a new one is started",
            timeout,
        )
        with contextlib.suppress(Exception):  # gone already
            self._child().signalProcess("KILL")
        self._lost(ContentTimeout(f"its text took more than {timeout:g} s"))

    def outReceived(self, data: bytes) -> None:
        if not self.alive:  # made to end: its jobs were failed or asked again
            return
        self.inbox += data
        if not self.ready:
            at = self.inbox.find(READY)
            if at < 0:
                return  # what the interpreter printed while starting, so far
            if at:
                logger.debug("The content process printed %r while starting", self.inbox[:at])
            del self.inbox[: at + len(READY)]
            self.ready = True
            self._watch_oldest()
        while len(self.inbox) >= HEADER.size:
            size, job = HEADER.unpack_from(self.inbox)
            if size > MAX_FRAME or job not in self.waiting:
                self._garbled(f"an answer to job {job} of {size} bytes")
                return
            if len(self.inbox) < HEADER.size + size:
                return
            payload = bytes(self.inbox[HEADER.size : HEADER.size + size])
            del self.inbox[: HEADER.size + size]
            answer = self.waiting.pop(job)[0]
            self._watch_oldest()
            try:
                # The child is this process's own, started from this package: trusted.
                ok, value = pickle.loads(payload)  # noqa: S301
            except Exception as exc:  # an exception class that cannot be made again here
                ok, value = False, RuntimeError(f"an answer that could not be read: {exc!r}")
            if ok:
                answer.callback(value)
            else:
                answer.errback(value)

    def errReceived(self, data: bytes) -> None:
        self.said += data
        while (end := self.said.find(b"\n")) >= 0 or len(self.said) > _LINE_LIMIT:
            cut = end if 0 <= end <= _LINE_LIMIT else _LINE_LIMIT
            self._say(self.said[:cut])
            del self.said[: cut + (cut == end)]

    def _say(self, line: bytes | bytearray) -> None:
        text = line.decode("utf-8", "replace").rstrip()
        if text:
            logger.warning("The content process said: %s", text)

    def _garbled(self, what: str) -> None:
        logger.error("The content process's answers are garbled (%s): it is replaced", what)
        self._lost()

    def childConnectionLost(self, childFD: int) -> None:
        if childFD == 1:  # its stdout closed: it is ending
            self._lost()
        elif childFD == 2 and self.said:  # a last line with no end
            self._say(self.said)
            self.said.clear()

    def processEnded(self, reason: Any) -> None:
        self._lost()
        if not self.reaped.called:
            self.reaped.callback(None)
        if not self.stopping:  # else the trigger is the one running now
            with contextlib.suppress(Exception):  # gone already
                _reactor().removeSystemEventTrigger(self.trigger)

    def _lost(self, why: ContentWorkerLost | None = None) -> None:
        """It has ended, or is made to: the page it was working on fails (*why*), the
        others are asked again (of a new one, or of the thread)."""
        if not self.alive:
            return
        self.alive = False
        self._watch_oldest()  # stops timing
        self._end()
        waiting, self.waiting = list(self.waiting.values()), {}
        if self.stopping:  # no new process now: what is left fails
            for answer, *_ in waiting:
                answer.errback(ContentWorkerLost("the crawl ended before its text was taken"))
            return
        if self.ready and waiting:
            culprit = waiting.pop(0)[0]
            if why is None:
                logger.error(
                    "The content process ended while taking a page's text: a new one is started"
                )
                why = ContentWorkerLost("the content process ended while taking its text")
            culprit.errback(why)
        for answer, function, args, timeout in waiting:
            _ask(function, args, timeout).chainDeferred(answer)

    def _end(self) -> None:
        """Close its stdin (it ends once its jobs are answered), kill it if it is still
        there after a while, and reap it."""
        if self.transport is None or self.reaped.called:
            return
        with contextlib.suppress(Exception):  # closed already
            self._child().closeStdin()
        if self._killer is None:
            self._killer = killer = _reactor().callLater(_STOP_WAIT, self._kill)
            self.reaped.addBoth(lambda _: killer.cancel() if killer.active() else None)
        self._reap()

    def stop(self) -> defer.Deferred[None]:
        """At the reactor's shutdown: end it and wait until it is reaped."""
        self.stopping = True
        self._end()
        return self.reaped

    def _reap(self, tries: int = 100) -> None:
        """Reap it: Twisted does on SIGCHLD, but a reactor run without its signal
        handlers never hears it. Reaped, its CPU time counts as the crawl's own."""
        if self.reaped.called or self.transport is None:
            return
        with contextlib.suppress(Exception):  # already reaped
            self._child().reapProcess()
        if not self.reaped.called:
            if tries:
                _reactor().callLater(_REAP_EVERY, self._reap, tries - 1)
            else:
                self.reaped.callback(None)  # given up: shutdown must not wait forever

    def _child(self) -> Any:
        """The child's transport (an IProcessTransport)."""
        return self.transport

    def _kill(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self._child().signalProcess("KILL")
        self._lost()


_worker: _Worker | None = None
_failed_starts = 0
#: Starts in a row that end before the child is ready, after which the thread takes over.
_STARTS = 3


def available() -> bool:
    """Whether this interpreter can run the content process: POSIX, not a frozen
    application. The reactor is asked at the first page, not here: a spider is made
    before Scrapy 2.13 installs its reactor, and touching it then installs another."""
    frozen = getattr(sys, "frozen", False) or not sys.executable
    return os.name == "posix" and not frozen


def _starts_processes() -> bool:
    """A reactor that starts processes (not Windows' IOCP, say; none at all where
    Scrapy runs without one)."""
    from twisted.internet.interfaces import IReactorProcess

    try:
        return IReactorProcess.providedBy(_reactor())
    except ImportError:  # no reactor
        return False


async def in_content_process(function: Callable[..., _T], *args: Any, timeout: float = 0.0) -> _T:
    """``function(*args)`` in the content process; *function* must be importable by
    name (a module's top-level function) and *args* picklable. Past *timeout* seconds
    (0: none) the process is killed and this raises :class:`ContentTimeout`. Where
    the process cannot start, on the content thread (which nothing can stop)."""
    return await maybe_deferred_to_future(_ask(function, args, timeout))


def _ask(
    function: Callable[..., Any], args: tuple[Any, ...], timeout: float = 0.0
) -> defer.Deferred[Any]:
    worker = _running()
    if worker is None:
        return deferred_from_coro(compat.in_content_thread(function, *args))
    answer: defer.Deferred[Any] = defer.Deferred()
    worker.submit(function, args, answer, timeout)
    return answer


def _running() -> _Worker | None:
    """The live worker, started if need be; None once starting has failed
    ``_STARTS`` times in a row."""
    global _worker, _failed_starts
    if _worker is not None and not _worker.alive:
        _failed_starts = 0 if _worker.ready else _failed_starts + 1
        _worker = None
        if _failed_starts == _STARTS:
            logger.error(
                "The content process ended %d times before it was ready: pages' texts are "
                "taken on a thread in this process from now on (INCRECRAWL_CONTENT_WORKER)",
                _STARTS,
            )
    if _failed_starts >= _STARTS:
        return None
    if _worker is None and not _starts_processes():
        _failed_starts = _STARTS
        logger.info(
            "The reactor cannot start the content process: pages' texts are taken on a "
            "thread in this process (INCRECRAWL_CONTENT_WORKER)"
        )
        return None
    if _worker is None:
        try:
            _worker = _spawn()
        except Exception as exc:  # a platform that refuses, no processes left
            _failed_starts = _STARTS
            logger.error(
                "The content process could not start (%s): pages' texts are taken on a "
                "thread in this process (INCRECRAWL_CONTENT_WORKER)",
                exc,
            )
            return None
    return _worker


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def _command() -> list[str]:
    return [sys.executable, "-c", BOOTSTRAP]


def _spawn() -> _Worker:
    worker = _Worker()
    reactor = _reactor()
    # The child imports what the parent would: the parent's import path, in full and
    # in order (a project run from its folder, a source checkout in tests, an egg).
    path = [os.fspath(entry) or os.getcwd() for entry in sys.path if isinstance(entry, str)]
    env = {**os.environ, "INCRECRAWL_CONTENT_PATH": os.pathsep.join(path)}
    command = _command()
    reactor.spawnProcess(worker, command[0], command, env=env, childFDs={0: "w", 1: "r", 2: "r"})
    worker.trigger = reactor.addSystemEventTrigger("before", "shutdown", worker.stop)
    return worker
