"""The worker processes a crawl's pages' texts are shipped to (``crawl/pipe_pool.py``):
calls answered through the workers' pipes, a call's error raised where it was
asked, a worker that dies failing the calls it held, never a lost or a wrong answer."""

from __future__ import annotations

import asyncio
import os
import signal
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
