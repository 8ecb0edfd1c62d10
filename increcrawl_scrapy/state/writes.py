"""Writing buffered results: a flush *takes* a batch from the buffers (in memory,
under the store's mutex) and *writes* it in one transaction. The two are apart so
that, on a shared state, the write runs on a thread of its own with a connection
of its own, while the crawl goes on recording into fresh buffers (``queue.py``).
"""

from __future__ import annotations

import operator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from increcrawl_scrapy.schedule.rows import PAGE_COLUMNS, RESULT_COLUMNS, PageState
from increcrawl_scrapy.state.backend import Backend
from increcrawl_scrapy.state.history import Check
from increcrawl_scrapy.state.hosts import write_hosts
from increcrawl_scrapy.state.pages import RESULT_INSERT

_insert_values = operator.itemgetter(*(PAGE_COLUMNS.index(c) for c in RESULT_INSERT))
_update_values = operator.itemgetter(
    *(PAGE_COLUMNS.index(c) for c in (*RESULT_COLUMNS, "normalized_url"))
)


@dataclass
class Batch:
    """Results taken from the buffers, with everything written beside them."""

    pages: dict[str, PageState]  # key -> result
    new: set[str]  # keys not in the table yet: inserted
    hosts: list[tuple[Any, ...]]  # (host, *increments) of hosts with new evidence
    contents: list[tuple[Any, ...]]  # kept texts (contents.py)
    memories: list[tuple[str, bytes]] = field(default_factory=list)  # memories.py
    checks: list[Check] = field(default_factory=list)  # history.py
    #: On a shared state: key -> fencing token of the leases under which the results
    #: were fetched, and the keys whose lease is kept (the row stays due).
    leased: dict[str, int] = field(default_factory=dict)
    keep: set[str] = field(default_factory=set)
    #: After writing: results not written, their lease taken over by another worker.
    lost: set[str] = field(default_factory=set)
    #: After writing: the hosts' stored counts (every worker's evidence).
    host_totals: dict[str, list[float]] = field(default_factory=dict)
    #: ``(run id, tokens charged so far)``: money is recorded as it is spent.
    tokens: tuple[int, int] | None = None


def write_batch(
    database: Backend,
    batch: Batch,
    *,
    demoted_wait: float,
    min_evidence: int,
    trusted_wait: float | None = None,
) -> None:
    """Write *batch* in one transaction of *database*; on a shared state, only
    results whose lease is current."""
    with database.transaction() as db:
        # In key order, as a claim and a fence lock rows: two writers never deadlock.
        pages = [batch.pages[key] for key in sorted(batch.pages)]
        # The hosts' rows first (a demotion then updates their pages): every batch
        # locks hosts before pages, so two never wait on each other in a circle.
        promoted: list[str] = []
        batch.host_totals = write_hosts(
            db, batch.hosts, demoted_wait, min_evidence, trusted_wait, promoted
        )
        if batch.leased:
            ours = database.fence(batch.leased, batch.keep)
            batch.lost = set(batch.leased) - ours
            pages = [p for p in pages if p.normalized_url not in batch.lost]
        new = [p for p in pages if p.normalized_url in batch.new]
        if new:
            db.executemany(db.sql.insert_result, [_insert_values(p) for p in new])
        db.executemany(
            db.sql.update_result,
            [_update_values(p) for p in pages if p.normalized_url not in batch.new],
        )
        written = {p.normalized_url for p in pages}
        rows = [row for row in batch.contents if row[0] in written]
        if rows:
            db.executemany(db.sql.keep_content, rows)
        # A page's with its result; one kept alone (memories.py) without.
        remembered = [r for r in batch.memories if r[0] in written or r[0] not in batch.pages]
        if any(body for _, body in remembered):
            db.executemany(db.sql.remember, [r for r in remembered if r[1]])
        if any(not body for _, body in remembered):  # an empty one: forgotten (a held item's)
            db.executemany(db.sql.forget_memory, [(k,) for k, body in remembered if not body])
        checks = [row for row in batch.checks if row[-1] in written]
        if checks:  # after the pages: a new page's check needs its id
            db.executemany(db.sql.record_check, checks)
        for host in promoted:  # after the pages: this batch's rows wait too
            db.execute(db.sql.promote, (trusted_wait, host))
        if batch.tokens is not None:
            run_id, charged = batch.tokens
            db.execute(db.sql.note_tokens, (charged, run_id))


class Writer:
    """Writes batches with a connection (*io*) under its lock: in place (``write``),
    or on a thread of its own, one batch at a time (``start``, then ``finished``)."""

    def __init__(
        self,
        io: Backend,
        lock: Any,
        demoted_wait: float,
        min_evidence: int,
        trusted_wait: float | None = None,
    ) -> None:
        self.io = io
        self.lock = lock
        self.demoted_wait = demoted_wait
        self.trusted_wait = trusted_wait
        self.min_evidence = min_evidence
        self._executor: ThreadPoolExecutor | None = None
        self._writing: tuple[Batch, Future[None]] | None = None

    @property
    def busy(self) -> bool:
        return self._writing is not None

    @property
    def in_flight(self) -> dict[str, PageState]:
        """The results of the batch being written (still unwritten, for lookups)."""
        return self._writing[0].pages if self._writing is not None else {}

    @property
    def in_flight_memories(self) -> list[tuple[str, bytes]]:
        return self._writing[0].memories if self._writing is not None else []

    def write(self, batch: Batch) -> None:
        def work() -> None:
            write_batch(
                self.io,
                batch,
                demoted_wait=self.demoted_wait,
                min_evidence=self.min_evidence,
                trusted_wait=self.trusted_wait,
            )

        with self.lock:
            # A shared state's connection may have dropped: written again once on a
            # new one (the failed transaction wrote nothing).
            self.io.retrying(work)

    def start(self, batch: Batch) -> None:
        assert self._writing is None, "one batch at a time"
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="increcrawl-writer")
        self._writing = (batch, self._executor.submit(self.write, batch))

    @property
    def future(self) -> Future[None] | None:
        """The write in progress (to wait for, off the store's mutex)."""
        return self._writing[1] if self._writing is not None else None

    def finished(self, *, block: bool = False) -> tuple[Batch, BaseException | None] | None:
        """The batch written since ``start`` and its error, once (with *block*, waits
        for it); None while it is being written, or when there is none."""
        if self._writing is None:
            return None
        batch, future = self._writing
        if not block and not future.done():
            return None
        self._writing = None
        return batch, future.exception()

    def shutdown(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
