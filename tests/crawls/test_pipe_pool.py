"""The worker processes a crawl's pages' texts are shipped to (``crawl/pipe_pool.py``):
calls answered through the workers' pipes, a call's error raised where it was
asked, a worker that dies failing the calls it held, never a lost or a wrong answer."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor, task
from twisted.internet.defer import Deferred

from increcrawl_scrapy.crawl.pipe_pool import PipePool


async def _answer(future: asyncio.Future[Any]) -> Any:
    return await Deferred.fromFuture(future)


async def _until(condition: Any, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within the bound"
        await task.deferLater(reactor, 0.02)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest_twisted.ensureDeferred
async def test_calls_are_answered_in_a_worker_and_their_errors_raised_here() -> None:
    pool = PipePool(1)
    try:
        # Asked before the worker is there: queued, then answered.
        pid, length = pool.submit(os.getpid), pool.submit(len, "abcd")
        assert await _answer(pid) != os.getpid() and await _answer(length) == 4
        assert pool.ready
        with pytest.raises(ValueError, match="invalid literal"):
            await _answer(pool.submit(int, "not a number"))
        # A library printing in the worker writes to its stderr, not into an answer.
        assert await _answer(pool.submit(print, "noise from a library")) is None
        assert await _answer(pool.submit(sorted, [3, 1, 2])) == [1, 2, 3]
        # An answer that cannot be sent back is that call's error; the worker goes on.
        with pytest.raises(RuntimeError, match="not sent back"):
            await _answer(pool.submit(threading.Lock))
        assert await _answer(pool.submit(len, "ab")) == 2 and not pool.broken
    finally:
        pool.shutdown()


@pytest_twisted.ensureDeferred
async def test_a_killed_worker_fails_the_calls_it_held() -> None:
    pool = PipePool(1)
    try:
        (pid,) = [await _answer(pool.submit(os.getpid))]
        held = [pool.submit(time.sleep, 30), pool.submit(len, "queued behind it")]
        await task.deferLater(reactor, 0.1)
        os.kill(pid, signal.SIGKILL)  # the OOM killer, say
        for future in held:
            with pytest.raises(BrokenProcessPool):
                await _answer(future)
        assert pool.broken
        with pytest.raises(BrokenProcessPool):
            pool.submit(len, "after the break")
    finally:
        pool.shutdown()


@pytest_twisted.ensureDeferred
async def test_a_shut_down_pools_workers_end() -> None:
    """Ended by their stdin closing, the call they hold finished first; one busy past
    the grace is killed. Calls not answered are cancelled."""
    pool = PipePool(2)
    await _until(lambda: len(pool._processes) == 2)
    pids = set(pool._processes)
    busy = pool.submit(time.sleep, 60)
    await task.deferLater(reactor, 0.1)
    pool.shutdown()
    assert busy.cancelled()
    await _until(lambda: not any(map(_alive, pids)), seconds=30)
    assert not pool.broken  # its workers' ends were asked for


@pytest_twisted.ensureDeferred
async def test_a_worker_imports_from_the_crawls_path_not_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -c`` puts the current folder first on its path: a ``json.py`` or a
    stale checkout of this package in the folder a crawl runs from (cron's home, a
    Scrapyd job's) ran in its worker. The worker's path is the crawl's."""
    import importlib.util

    (tmp_path / "increcrawl_planted.py").write_text("raise ImportError('planted')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p and Path(p).resolve() != tmp_path])
    assert importlib.util.find_spec("increcrawl_planted") is None  # not the crawl's
    pool = PipePool(1)
    try:
        found = await _answer(pool.submit(importlib.util.find_spec, "increcrawl_planted"))
        assert found is None
    finally:
        pool.shutdown()


@pytest_twisted.ensureDeferred
async def test_a_worker_is_out_of_the_terminals_reach() -> None:
    """Ctrl-C (SIGINT) and a group's SIGTERM reach every process of the crawl's group:
    a worker in it died in its start, before it could ignore them, and came back as
    "a content process ended". Its own session: it ends with its stdin."""
    pool = PipePool(1)
    try:
        group = await _answer(pool.submit(os.getpgid, 0))
        assert group != os.getpgid(0)
    finally:
        pool.shutdown()


@pytest_twisted.ensureDeferred
async def test_no_interpreter_to_start_is_a_pool_broken_at_its_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An embedded interpreter has no ``sys.executable``: no worker, the pool broken
    (the caller takes the work on its thread), nothing raised at its end."""
    monkeypatch.setattr(sys, "executable", None)
    pool = PipePool(1)
    await _until(lambda: pool.broken)
    assert pool.failed_start
    pool.shutdown()
    await Deferred.fromFuture(asyncio.ensure_future(pool.ended()))


def test_a_worker_without_stderr_keeps_its_answers_apart(tmp_path: Path) -> None:
    """A crawl run with its standard streams closed (a daemon's) starts a worker
    whose fd 2 is free: its answers' pipe landed there, and a library's print (sent
    to stderr) would have corrupted the answers."""
    import pickle
    import struct
    import subprocess

    header = struct.Struct("!QQ")
    code = "from increcrawl_scrapy.crawl.pipe_pool import serve; serve()"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    worker = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        preexec_fn=lambda: os.close(2),  # the daemon's closed stderr
    )
    try:
        calls = [(print, ("noise from a library",)), (len, ("abc",))]
        for number, call in enumerate(calls, 1):
            frame = pickle.dumps(call)
            worker.stdin.write(header.pack(len(frame), number) + frame)
        worker.stdin.close()
        answers = {}
        out = worker.stdout
        while head := out.read(header.size):
            size, number = header.unpack(head)
            answers[number] = pickle.loads(out.read(size))
        assert answers == {0: (True, None), 1: (True, None), 2: (True, 3)}
    finally:
        worker.kill()
        worker.wait()
        worker.stdout.close()
