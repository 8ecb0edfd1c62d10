"""A page's content work in a process of its own (``INCRECRAWL_CONTENT_WORKER =
"process"``, the default).

Parsing, extraction, conversion and the fingerprint take about 0.2 ms of CPU a page.
On a thread they still hold the GIL most of that time, and every hand-back costs the
reactor's thread a switch: measured beside Scrapy's SitemapSpider
(``benchmarks/content_throughput.py``), a thread cost the crawl a second of wall
time per 3,000 pages, a second process next to nothing. The process is started once
per Python process, on first use, and reused by every crawl in it.

The reactor never waits on it: jobs and answers are length-prefixed pickles on the
child's stdin and stdout, written through the reactor's own buffered transport.
A worker that dies (a crash in a parser, an out-of-memory kill) fails the pages it
held with :class:`ContentWorkerLost`, a site failure that backs off; the next page
starts a new one. The child's stderr is the crawl's: its tracebacks are seen.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import signal
import struct
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.utils.defer import maybe_deferred_to_future
from twisted.internet import defer, protocol

from increcrawl_scrapy import compat, stats
from increcrawl_scrapy.content.fingerprint import content_fingerprint
from increcrawl_scrapy.content.page_text import ContentOptions, PageText, UnusablePage, page_text

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_HEADER = struct.Struct(">II")  # the payload's size, the job's number
#: How long the reactor's shutdown waits for the child to end after its stdin closes.
_STOP_WAIT = 5.0
_REAP_EVERY = 0.02


class ContentWorkerLost(UnusablePage):
    """The content process ended while it held this page: a site failure, counted
    and backed off like any unusable page, never a crash of the crawl."""

    stat = stats.CONTENT_WORKER_LOST


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
    kind, url, body, content_type, encoding = page
    headers = {"Content-Type": content_type} if content_type else None
    extra: dict[str, Any] = {"encoding": encoding} if encoding else {}
    return response_text(kind(url, body=body, headers=headers, **extra), options)


def with_print(
    fingerprint: bool, take: Callable[..., PageText], *args: Any
) -> tuple[PageText, str | None]:
    """A page's text by *take*, with its fingerprint when asked (the default rules
    are linear: taken with the text, they spare the reactor's thread)."""
    found = take(*args)
    return found, content_fingerprint(found.text) if fingerprint else None


def frame(job: int, payload: Any) -> bytes:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data), job) + data


class _Worker(protocol.ProcessProtocol):
    """The parent's side: jobs out on the child's stdin, answers in on its stdout."""

    def __init__(self) -> None:
        self.waiting: dict[int, defer.Deferred[Any]] = {}
        self.inbox = bytearray()
        self.next_id = 0
        self.alive = True
        self.answered = False  # anything at all: it started
        self.reaped: defer.Deferred[None] = defer.Deferred()

    def submit(self, function: Callable[..., Any], args: tuple[Any, ...]) -> defer.Deferred[Any]:
        self.next_id += 1
        answer: defer.Deferred[Any] = defer.Deferred()
        self.waiting[self.next_id] = answer
        self._child().write(frame(self.next_id, (function, args)))  # buffered: never blocks
        return answer

    def outReceived(self, data: bytes) -> None:
        self.inbox += data
        while len(self.inbox) >= _HEADER.size:
            size, job = _HEADER.unpack_from(self.inbox)
            if len(self.inbox) < _HEADER.size + size:
                return
            # The child is this process's own, started from this package: trusted.
            ok, value = pickle.loads(self.inbox[_HEADER.size : _HEADER.size + size])  # noqa: S301
            del self.inbox[: _HEADER.size + size]
            self.answered = True
            answer = self.waiting.pop(job, None)
            if answer is None:
                continue
            if ok:
                answer.callback(value)
            else:
                answer.errback(value)

    def childConnectionLost(self, childFD: int) -> None:
        if childFD == 1:  # its stdout closed: it is ending
            self._lost()
            self._reap()

    def processEnded(self, reason: Any) -> None:
        self._lost()
        if not self.reaped.called:
            self.reaped.callback(None)

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

    def _lost(self) -> None:
        if not self.alive:
            return
        self.alive = False
        waiting, self.waiting = self.waiting, {}
        for answer in waiting.values():
            answer.errback(ContentWorkerLost("the content process ended while taking its text"))
        if waiting:
            logger.error("The content process ended with %d pages in hand", len(waiting))

    def stop(self) -> defer.Deferred[None]:
        """Close its stdin (it ends once its jobs are answered) and wait until it is
        reaped; kill it if it is still there after a while."""
        if self.transport is None or self.reaped.called:
            return defer.succeed(None)
        if self.alive:
            self._child().closeStdin()
        timer = _reactor().callLater(_STOP_WAIT, self._kill)
        self.reaped.addBoth(lambda _: timer.cancel() if timer.active() else None)
        return self.reaped

    def _child(self) -> Any:
        """The child's transport (an IProcessTransport)."""
        return self.transport

    def _kill(self) -> None:
        with contextlib.suppress(Exception):  # already gone
            self._child().signalProcess("KILL")
        self._lost()
        self._reap()


_worker: _Worker | None = None
_failed_starts = 0
#: Starts in a row that end before any answer, after which the thread takes over.
_STARTS = 3


def available() -> bool:
    """Whether this reactor can run a child process (any POSIX one can)."""
    from twisted.internet.interfaces import IReactorProcess

    return IReactorProcess.providedBy(_reactor())


async def in_content_process(function: Callable[..., _T], *args: Any) -> _T:
    """``function(*args)`` in the content process; *function* must be importable by
    name (a module's top-level function) and *args* picklable. Where the process
    cannot start, on the content thread."""
    worker = _running()
    if worker is None:
        return await compat.in_content_thread(function, *args)
    return await maybe_deferred_to_future(worker.submit(function, args))


def _running() -> _Worker | None:
    """The live worker, started if need be; None once starting has failed
    ``_STARTS`` times in a row (ended before answering anything)."""
    global _worker, _failed_starts
    if _worker is not None and not _worker.alive:
        _failed_starts = 0 if _worker.answered else _failed_starts + 1
        _worker = None
        if _failed_starts == _STARTS:
            logger.error(
                "The content process ended %d times before answering: pages' texts "
                "are taken on a thread from now on (INCRECRAWL_CONTENT_WORKER)",
                _STARTS,
            )
    if _failed_starts >= _STARTS:
        return None
    if _worker is None:
        _worker = _spawn()
    return _worker


def _reactor() -> Any:
    from twisted.internet import reactor

    return reactor


def _command() -> list[str]:
    return [sys.executable, "-m", __name__]


def _spawn() -> _Worker:
    worker = _Worker()
    reactor = _reactor()
    # The child imports this package as the parent does (a project run from its
    # folder, a source checkout in tests): the parent's import path, in full.
    path = [entry or os.getcwd() for entry in sys.path]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    command = _command()
    reactor.spawnProcess(
        worker,
        command[0],
        command,
        env=env,
        childFDs={0: "w", 1: "r", 2: 2},
    )
    reactor.addSystemEventTrigger("before", "shutdown", worker.stop)
    return worker


# -- the child's side --------------------------------------------------------------


def _serve() -> None:
    """Answer jobs until stdin ends. Stdout is the answers' channel alone: anything
    the libraries print goes to stderr. Ctrl-C reaches the whole foreground group:
    the crawl stops gracefully and still needs its pages' texts, so this process
    ends when its stdin does, not on SIGINT."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    jobs = sys.stdin.buffer
    while True:
        header = jobs.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        size, job = _HEADER.unpack(header)
        try:
            function, args = pickle.loads(jobs.read(size))  # noqa: S301 - its parent's
            answer = (True, function(*args))
        except Exception as exc:  # handed to the page that asked
            answer = (False, exc)
        try:
            data = frame(job, answer)
        except Exception as exc:  # an answer that does not pickle
            data = frame(job, (False, RuntimeError(f"{type(exc).__name__}: {exc}")))
        answers.write(data)
        answers.flush()


if __name__ == "__main__":
    _serve()
