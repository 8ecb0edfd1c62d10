"""The content process's own side (``crawl/content_process.py`` starts it): answer
jobs read on stdin, one at a time, in the order asked, until stdin ends.

The wire: after whatever the interpreter printed while starting, the line
:data:`READY` once the content modules are imported; then frames of a header
(payload size, job number) and a pickle: ``(function, args)`` one way,
``(ok, value)`` the other. Stdlib only here: the bootstrap imports this before any
library can print on the answers' channel.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import traceback
from typing import Any, BinaryIO

HEADER = struct.Struct(">II")  # the payload's size, the job's number
READY = b"\n-- increcrawl content process ready --\n"
#: An answer larger than this is no answer: a garbled channel (1 GiB).
MAX_FRAME = 1 << 30

#: Run by ``python -c``: before any import that could print or be shadowed, stdout
#: becomes the answers' channel alone (prints go to stderr), the parent's import path
#: replaces this one (no working folder first), and the signals a terminal or a
#: service manager sends the whole group are left to the parent, whose graceful stop
#: still needs the pages' texts: this process ends when its stdin does.
BOOTSTRAP = (
    "import os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "answers = os.fdopen(os.dup(1), 'wb')\n"
    "os.dup2(2, 1)\n"
    "sys.path[:] = os.environ.pop('INCRECRAWL_CONTENT_PATH').split(os.pathsep)\n"
    "import increcrawl_scrapy.crawl.content_process\n"  # what jobs call: imported before READY
    "from increcrawl_scrapy.crawl.content_child import serve\n"
    "serve(answers)\n"
)


def frame(job: int, payload: Any) -> bytes:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    return HEADER.pack(len(data), job) + data


def serve(answers: BinaryIO) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # again, in case run otherwise
    with answers:
        answers.write(READY)
        answers.flush()
        jobs = sys.stdin.buffer
        while True:
            header = jobs.read(HEADER.size)
            if len(header) < HEADER.size:
                return
            size, job = HEADER.unpack(header)
            answers.write(_answer(job, jobs.read(size)))
            answers.flush()


def _answer(job: int, payload: bytes) -> bytes:
    try:
        function, args = pickle.loads(payload)  # noqa: S301 - its parent's own
        answer: tuple[bool, Any] = (True, function(*args))
    except Exception as exc:  # handed to the page that asked
        answer = (False, exc)
    try:
        return frame(job, answer)
    except Exception:  # an answer that does not pickle: its story, as text
        told = "".join(traceback.format_exception(*sys.exc_info()))[-4000:]
        if not answer[0]:
            told = "".join(traceback.format_exception(answer[1]))[-4000:]
        return frame(
            job, (False, RuntimeError(f"in the content process (pid {os.getpid()}): {told}"))
        )
