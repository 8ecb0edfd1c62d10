"""Worker processes fed through their pipes by the crawl's own event loop.

``ProcessPoolExecutor`` ships each call through two threads of the crawl's process
(its queue's feeder and its manager), which take turns with the reactor's for the
GIL: on pages that mark their ``<main>`` a worker gained nothing, as the reactor's
thread paid in hand-overs what the worker spared it (``benchmarks/RESULTS.md``, #51).
Here each call is a frame written to a worker's stdin and its answer a frame read
from its stdout by the event loop, as it reads a socket: no thread of ours.

Workers are fresh interpreters (``python -c``), never a fork of a process with
threads, and never run the crawl's ``__main__`` (a script without an
``if __name__ == "__main__":`` guard would crawl again). A worker ends when its
stdin closes: with the pool, or with the crawl's process however it ended (SIGKILL
too). A worker that ends while it holds calls breaks the pool, as a
``ProcessPoolExecutor``'s: its calls and every other held fail with
``BrokenProcessPool``, and the caller decides what to ask again, and of what.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct
import sys
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, BinaryIO

logger = logging.getLogger(__name__)

#: A frame: its pickle's length and its call's number, then the pickle: (function,
#: arguments) for a call, (ok, answer or exception) for its answer. Number 0 is a
#: worker's "ready": its imports done.
_HEADER = struct.Struct("!QQ")
_READY = 0
#: How long a closed pool's worker may finish the call it holds before it is killed.
_GRACE = 5.0


class _Worker(asyncio.SubprocessProtocol):
    def __init__(self, pool: PipePool) -> None:
        self.pool = pool
        self.transport: asyncio.SubprocessTransport | None = None
        self.stdin: Any = None
        self.ready = False
        self.held: set[int] = set()
        self.exited: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buffer = bytearray()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self.transport = transport
        self.stdin = transport.get_pipe_transport(0)

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        start = 0
        while len(buffer) - start >= _HEADER.size:
            size, number = _HEADER.unpack_from(buffer, start)
            end = start + _HEADER.size + size
            if len(buffer) < end:
                break
            self.pool._answered(self, number, bytes(buffer[start + _HEADER.size : end]))
            start = end
        del buffer[:start]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:  # its answers' pipe: it ended, or will answer nothing more
            self.pool._lost(self)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)
        self.pool._lost(self)
        if self.transport is not None:
            self.transport.close()  # its pipes' ends; the process is gone already

    def send(self, number: int, frame: bytes) -> None:
        self.held.add(number)
        self.stdin.write(_HEADER.pack(len(frame), number) + frame)

    def end(self, kill: bool) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if kill:
            self.transport.close()  # kills it, if it still runs
            return
        self.stdin.close()  # it ends once its call is answered
        asyncio.get_running_loop().call_later(_GRACE, self.end, True)


class PipePool:
    """*workers* processes, started at once (in the background); calls queue in
    their pipes until taken. ``ready`` once a worker has done its imports."""

    def __init__(self, workers: int, imports: tuple[str, ...] = ()) -> None:
        self.broken = False
        self.failed_start = False  # broken as its workers started: none was there
        self._closed = False
        self._workers: list[_Worker] = []
        self._futures: dict[int, asyncio.Future[Any]] = {}
        self._queued: list[tuple[int, bytes]] = []  # before the workers are there
        self._number = _READY
        self._processes: dict[int, _Worker] = {}  # by pid (tests kill them)
        self._starting = asyncio.ensure_future(self._start(workers, imports))

    @property
    def ready(self) -> bool:
        return any(worker.ready for worker in self._workers)

    def submit(self, function: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        if self.broken or self._closed:
            raise BrokenProcessPool("the pool is broken or shut down")
        self._number += 1
        future = asyncio.get_running_loop().create_future()
        self._futures[self._number] = future
        frame = pickle.dumps((function, args), pickle.HIGHEST_PROTOCOL)
        if self._workers:
            self._least_held().send(self._number, frame)
        else:
            self._queued.append((self._number, frame))
        return future

    def shutdown(self, wait: bool = False, cancel_futures: bool = True) -> None:
        """Calls not answered are cancelled; workers end once they finish the call
        they hold, killed after a grace (*wait* is not waited for: the crawl's
        loop must go on)."""
        if self._closed:
            return
        self._closed = True
        for future in self._futures.values():
            if cancel_futures and not future.done():
                future.cancel()
        self._futures.clear()
        for worker in self._workers:
            # One still at its imports holds nothing: not waited for.
            worker.end(kill=self.broken or not worker.ready)

    async def ended(self) -> None:
        """Once every worker has ended (after :meth:`shutdown`): reaped, so no process
        outlives the crawl and their CPU counts as the crawl's."""
        await self._starting
        await asyncio.gather(*(worker.exited for worker in self._workers))

    async def _start(self, workers: int, imports: tuple[str, ...]) -> None:
        loop = asyncio.get_running_loop()
        # Its imports found where the crawl's are (a Scrapyd egg, a script's folder).
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # ``-c`` puts the current folder first on the path: not the crawl's.
        code = (
            "import sys; sys.path[:] = [p for p in sys.path if p]; "
            f"from {__name__} import serve; serve({imports!r})"
        )
        try:
            if not sys.executable:  # an embedded interpreter
                raise RuntimeError("no Python interpreter to start (sys.executable)")
            for _ in range(workers):
                _transport, worker = await loop.subprocess_exec(
                    lambda: _Worker(self),
                    sys.executable,
                    "-c",
                    code,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=None,
                    env=env,
                    # Out of the terminal's reach (Ctrl-C, a group's SIGTERM reached it
                    # mid-start): it ends with its stdin.
                    start_new_session=True,
                )
                self._workers.append(worker)
                self._processes[_transport.get_pid()] = worker
                if self._closed or self.broken:
                    worker.end(kill=True)
        except (OSError, NotImplementedError, RuntimeError) as exc:  # no way to start one
            logger.warning("A content process could not start: %s", exc)
            self.failed_start = True
            self._break()
            return
        queued, self._queued = self._queued, []
        for number, frame in queued:
            if number in self._futures:
                self._least_held().send(number, frame)

    def _least_held(self) -> _Worker:
        return min(self._workers, key=lambda worker: (not worker.ready, len(worker.held)))

    def _answered(self, worker: _Worker, number: int, frame: bytes) -> None:
        try:
            ok, value = pickle.loads(frame)  # noqa: S301 (our own worker's answer)
        except Exception as exc:  # an answer that cannot be read back: that call's error
            ok, value = False, RuntimeError(f"an answer not read back: {exc!r}")
        if number == _READY:
            worker.ready = True
            return
        worker.held.discard(number)
        future = self._futures.pop(number, None)
        if future is None or future.done():
            return  # cancelled meanwhile
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def _lost(self, worker: _Worker) -> None:
        if not self._closed:
            self._break()

    def _break(self) -> None:
        if self.broken:
            return
        self.broken = True
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(BrokenProcessPool("a content process ended"))
        for worker in self._workers:
            worker.end(kill=True)


def serve(imports: tuple[str, ...] = ()) -> None:
    """A worker's life: *imports* done, "ready" said, then each call read from stdin
    answered on stdout, until stdin closes. Its stdout is kept for the answers (a
    library's ``print`` goes to stderr)."""
    try:
        os.fstat(2)
    except OSError:  # a daemon's crawl, its streams closed: what is printed goes nowhere
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    answers = os.fdopen(os.dup(1), "wb")  # above 2 now
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    calls = sys.stdin.buffer
    for name in imports:
        __import__(name)
    _write(answers, _READY, (True, None))
    while True:
        header = calls.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return  # the pool closed, or the crawl's process is gone
        size, number = _HEADER.unpack(header)
        function, args = pickle.loads(calls.read(size))  # noqa: S301 (from our crawl)
        try:
            answer = (True, function(*args))
        except Exception as exc:
            answer = (False, exc)
        try:
            _write(answers, number, answer)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _write(answers, number, (False, RuntimeError(f"an answer not sent back: {exc!r}")))


def _write(answers: BinaryIO, number: int, answer: tuple[bool, Any]) -> None:
    frame = pickle.dumps(answer, pickle.HIGHEST_PROTOCOL)
    answers.write(_HEADER.pack(len(frame), number) + frame)
    answers.flush()
