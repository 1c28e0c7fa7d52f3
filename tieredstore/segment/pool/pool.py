"""UploadBufferPool: one byte budget for the appends of every open segment.

``append`` puts bytes in the segment's buffer and returns their position at
once; the pool commits them (``FileSegment.commit0``) later, when one of three
things makes them *due*:

- the buffer holds a full commit (the segment's ``commit_size``, else the
  pool's ``chunk_size``): whole commits are due, so chunk objects are full
  size and the tail waits for more bytes;
- the group-commit interval has passed since the buffer's oldest byte that
  was not yet due (one timer for the whole pool, armed for the oldest buffer);
- the pool needs room: above ``high_water`` x budget of bytes not yet due, the
  *largest* buffers become due until at most ``low_water`` x budget are left.

Largest first, not oldest first: the oldest buffer is what the interval timer
already takes care of, and a room-making flush exists to free bytes. The
largest buffer frees the most bytes per PUT and makes the fullest chunk
object; oldest-first would pick a quiet queue's few bytes and pay a request
for almost no room. Room-making starts at the high-water mark, before the
budget is full, so that appends seldom wait for a PUT; the gap between the
two marks batches the work, so a full pool does not sort its buffers on every
append.

The pool is the cross-segment part: the budget, the choice of what is due,
and the public API. Each segment's buffer, and how its due bytes are
committed (one commit at a time, a failed one reported once and re-sent
unchanged, positions reconciled, errors that stop the segment), is its
:class:`~tieredstore.segment.pool.committer.SegmentCommitter`. Commits run
concurrently across segments, at most ``upload_concurrency`` at once. Bytes
leave the budget when their commit lands.

When the budget is full, ``append`` waits (first come, first served) and
``try_append`` returns ``BUFFER_FULL`` and appends nothing. An append larger
than the whole budget raises ``AppendTooLarge``: admitting it would break the
budget, waiting for it could never end.

One event loop: call the pool from the loop it first ran on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from tieredstore.errors import SegmentSealed, StoreClosed
from tieredstore.segment.base import FileSegment
from tieredstore.segment.pool.budget import Budget
from tieredstore.segment.pool.committer import SegmentCommitter
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.options import (
    BUFFER_FULL,
    AppendResult,
    AppendTooLarge,
    PoolOptions,
)
from tieredstore.segment.pool.shared import PoolShared
from tieredstore.segment.pool.sink import LogSink
from tieredstore.segment.reader import ReadMode

log = logging.getLogger(__name__)

YIELD_BYTES = 1024 * 1024  # append yields to the event loop once per this many bytes


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    # A caller may reuse a bytearray after append returns: keep our own copy.
    return data if isinstance(data, bytes) else bytes(data)


class UploadBufferPool:
    """Buffers appends to many segments within one byte budget; commits them."""

    def __init__(self, options: PoolOptions | None = None) -> None:
        self.options = options or PoolOptions()
        self.metrics = PoolMetrics(self.options.budget_bytes)
        self._budget = Budget(self.options.budget_bytes, self.metrics, self._make_room)
        self._shared = PoolShared(self._budget, self.metrics, self.options,
                                  self._interval_passed)
        # by id(segment); the committer holds the segment
        self._committers: dict[int, SegmentCommitter] = {}
        self._closing = False
        self._closed = False
        self._unyielded = 0  # bytes appended since append last yielded to the loop

    def send_small_commits_to(self, sink: LogSink) -> None:
        """Write mode log: commits smaller than a chunk and than
        ``direct_commit_size`` go to ``sink`` (see
        :mod:`tieredstore.segment.pool.sink`), and a group commit makes every
        buffer's bytes due at once. Call before the first append."""
        self._shared.log_sink = sink

    def check_commits_with(self, check: Callable[[float], Awaitable[None]]) -> None:
        """Before each commit to a segment (not to the log sink), await
        ``check(taken)``, ``taken`` the ``time.monotonic()`` at which its bytes
        were taken: the writer check (docs/writers.md, "The writer check"). A
        ``Fenced`` error it raises stops the segment for good. Call before the
        first append."""
        self._shared.writer_check = check

    def _interval_passed(self, committers: list[SegmentCommitter]) -> None:
        """The group-commit interval of ``committers``' oldest bytes not yet due
        passed; in write mode log, every buffer's bytes become due with them, so
        that one log object takes them all (each buffer looked at once).

        Derived segments' bytes (consume queues, rebuilt from the commit log
        after a crash) wait ``chunk_wait`` whatever their rate, so that a busy
        queue's make no log object of their own while its commit log waits for
        its chunk; but they ride a group commit that writes a log object
        anyway (a commit log's bytes go into it), where holding them would
        save nothing and only make a longer tail for other processes' reads to
        walk (quiet queues). And they start no group commit of their own while
        a commit log's bytes are
        buffered: those make one within an interval, and the derived bytes go
        with it. Else each dispatch (its interval starts when the records
        land, out of step with the commit log's) would start one more group
        commit per interval (1,000 quiet queues: about 40,000 PUTs an hour
        instead of 18,000)."""
        if self._shared.log_sink is None:
            for committer in committers:
                committer.interval_passed()
            return
        pending = self._not_due()
        if (self.options.chunk_wait > 0 and all(c.segment.derived for c in committers)
                and any(not c.segment.derived for c in pending)):
            for committer in committers:
                if committer.not_due > 0 and committer.error is None:
                    self._shared.timer.add(committer)  # looked at by that group commit
            return
        ride = False
        for due in pending:
            if not due.segment.derived:
                ride = due.interval_passed() or ride
        for due in pending:
            if due.segment.derived:
                due.interval_passed(ride=ride)

    def _not_due(self) -> list[SegmentCommitter]:
        """The healthy buffers holding bytes not yet due."""
        return [c for c in self._committers.values()
                if c.not_due > 0 and c.error is None and not c.detaching]

    # --- appending ------------------------------------------------------------

    async def append(self, segment: FileSegment, data: bytes | bytearray | memoryview) -> int:
        """Buffer ``data`` for ``segment``; return the position where it starts.

        Waits while the budget is full. Raises the segment's error if its
        commits stopped, ``StoreClosed`` after ``close``, ``AppendTooLarge``
        for more bytes than the whole budget.
        """
        body = _as_bytes(data)
        placed = self.append_nowait(segment, body)
        if placed.position is not None:
            position = placed.position
        else:
            n = len(body)
            if self._shared.errored + n > self._budget.limit:
                raise self._shared.stuck(n)
            await self._budget.wait(n)
            try:
                committer = self._committer_for(segment)
            except BaseException:
                self._budget.unreserve(n)
                raise
            position = self._place(committer, body)
            self._unyielded += n
        if self.yield_due():
            await asyncio.sleep(0)
        return position

    def append_nowait(self, segment: FileSegment,
                      data: bytes | bytearray | memoryview) -> AppendResult:
        """:meth:`append` where it need not wait: appended at a position, or
        ``BUFFER_FULL`` (nothing appended, nothing counted) while the budget has
        no room. A caller that appends this way yields to the loop whenever
        :meth:`yield_due` says so."""
        committer = self._committer_for(segment)
        body = _as_bytes(data)
        n = len(body)
        if n == 0:
            return AppendResult.at(committer.buffer.end)
        self._check_size(committer, n)
        if self._budget.must_wait(n):
            return BUFFER_FULL
        self._budget.reserve(n)
        position = self._place(committer, body)
        self._unyielded += n
        return AppendResult.at(position)

    def yield_due(self) -> bool:
        """Whether :data:`YIELD_BYTES` were appended since the producer last let
        the loop run: a producer that never waits would starve the commit
        workers on its loop until its next flush (their PUTs never start).

        Commits in worker threads (``PoolOptions.thread_handoff``) are given
        the GIL here too: a thread waits for it at each syscall of a commit
        while this one computes, by default up to 5 ms each time (about 60 ms
        per 8 MiB chunk on the local directory, against 8 ms unhindered), so
        chunks fell behind and the flush waited for them."""
        if self._unyielded < YIELD_BYTES:
            return False
        self._unyielded = 0
        self._shared.hand_off()
        return True

    def hand_off(self) -> None:
        """Before a burst of work on the loop's thread: let commits running in
        worker threads take the GIL (:meth:`PoolShared.hand_off`)."""
        self._shared.hand_off()

    def try_append(
        self, segment: FileSegment, data: bytes | bytearray | memoryview
    ) -> AppendResult:
        """Like :meth:`append` without waiting: ``BUFFER_FULL`` (nothing appended)
        when the budget has no room now, or when appends are already waiting."""
        body = _as_bytes(data)
        placed = self.append_nowait(segment, body)
        if not placed.ok:
            self.metrics.buffer_full += 1
            self._make_room(len(body))
        return placed

    def append_position(self, segment: FileSegment) -> int:
        """Where the next append to ``segment`` goes: commit position + buffered bytes."""
        committer = self._committers.get(id(segment))
        return segment.commit_position if committer is None else committer.buffer.end

    # --- reading --------------------------------------------------------------

    def buffered_range(self, segment: FileSegment) -> tuple[int, int]:
        """``(start, end)`` of the bytes of ``segment`` the pool holds."""
        committer = self._committers.get(id(segment))
        if committer is None:
            return segment.commit_position, segment.commit_position
        return committer.buffer.start, committer.buffer.end

    async def read(self, segment: FileSegment, position: int, length: int, *,
                   mode: ReadMode = ReadMode.COPY) -> bytes | memoryview:
        """Bytes ``[position, position + length)`` of ``segment``, committed (read
        as ``mode`` says) or buffered."""
        committer = self._committers.get(id(segment))
        if committer is None or position + length <= committer.buffer.start:
            return await segment.read_as0(position, length, mode)
        buf = committer.buffer
        start = buf.start
        tail_from = max(position, start)
        # Copy the buffered part first: once we await, it may be dropped as committed.
        tail = buf.read(tail_from, position + length - tail_from, segment=committer.label)
        if position >= start:
            return tail
        return await segment.read0(position, start - position) + tail

    # --- flushing and closing -----------------------------------------------

    async def flush(self, segment: FileSegment | None = None, until: int | None = None, *,
                    last: bool = False) -> None:
        """Return when everything appended before the call (to ``segment``, or to
        every segment) is committed; raise what stopped it otherwise. With
        ``segment`` and ``until``, everything is still made due, but the call
        returns once ``segment``'s bytes before position ``until`` are committed.
        ``last`` (with ``segment``): it takes no more bytes (a roll, before its
        seal), so its last commits go to it as a chunk whatever their length,
        never into a log object that the seal would move into a chunk again.

        With several failed segments, the others still complete; the first
        error is raised and the rest are logged.
        """
        if segment is not None:
            committer = self._committers.get(id(segment))
            if committer is not None:
                await committer.flush(until, last=last)
            return
        committers = [c for c in self._committers.values()
                      if c.buffer.size or c.error is not None]
        results = await asyncio.gather(*(c.flush() for c in committers),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, Exception):
                raise error
        if errors:
            for error in errors[1:]:
                log.warning("flush failed too: %r", error)
            raise errors[0]

    async def detach(self, segment: FileSegment) -> bytes:
        """Stop buffering for ``segment`` (after flushing it, before sealing or rolling).

        Waits for a commit in flight. Returns the bytes that were never
        committed, now the caller's (empty after a successful flush), and
        releases them from the budget.
        """
        committer = self._committers.get(id(segment))
        if committer is None:
            return b""
        await committer.stop()
        if self._committers.get(id(segment)) is not committer:
            return b""
        del self._committers[id(segment)]
        return committer.take_back()

    async def wait_idle(self) -> bool:
        """Return when no commit is under way: the commits due so far have landed
        or failed; whether any was. Unlike :meth:`flush` it makes nothing due and
        raises nothing; bytes not yet due stay buffered (for a caller that needs
        the pool quiet, such as a deterministic test or a benchmark between phases)."""
        return await self._shared.tasks.wait_idle()

    async def close(self) -> None:
        """Flush everything, wait for commits in flight, stop the timer.

        Appends after (or waiting during) close raise ``StoreClosed``. If the
        flush fails its error is raised, after everything has stopped; the
        bytes it could not commit stay readable and ``detach`` hands them back.
        """
        if self._closed:
            return
        self._closing = True
        self._shared.timer.stop()
        self._budget.fail_waiters(lambda _: StoreClosed("the upload buffer pool was closed"))
        try:
            await self.flush()
        finally:
            await self.wait_idle()
            self._closed = True

    async def __aenter__(self) -> UploadBufferPool:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def snapshot(self) -> dict[str, Any]:
        """Metrics, plus the pool's state right now, as plain values."""
        out = self.metrics.snapshot()
        out.update(
            segments=len(self._committers),
            bytes_not_due=self._shared.not_due,
            bytes_errored=self._shared.errored,
            waiting_appends=self._budget.waiting,
            commits_in_flight=self._shared.inflight,
            failed_segments=sum(1 for c in self._committers.values() if c.error is not None),
        )
        return out

    @property
    def bytes_in_use(self) -> int:
        """Bytes admitted and not yet committed (or handed back); at most the budget."""
        return self._budget.in_use

    # --- budget ----------------------------------------------------------------

    def _check_size(self, committer: SegmentCommitter, n: int) -> None:
        if n > self._budget.limit:
            raise AppendTooLarge(
                f"{committer.label}: an append of {n} bytes is larger than the whole upload "
                f"buffer pool ({self._budget.limit} bytes, config 'pool_bytes')"
            )

    def _make_room(self, need: int) -> None:
        """Make the largest buffers due until, once their commits land, ``need`` more
        bytes fit and at most ``low_water`` x budget are left not due."""
        opts, shared = self.options, self._shared
        limit = self._budget.limit
        held = shared.errored + self._budget.reserved  # bytes no commit of ours will free
        if shared.not_due == 0 or (shared.not_due + need <= opts.high_water * limit
                and shared.not_due + held + need <= limit):
            return
        target = min(opts.low_water * limit - need, limit - held - need)
        for committer in sorted(self._not_due(), key=lambda c: c.not_due, reverse=True):
            if shared.not_due <= target:
                break
            committer.schedule(committer.buffer.end, "room")

    # --- committers -------------------------------------------------------------

    def _committer_for(self, segment: FileSegment) -> SegmentCommitter:
        if self._closing:
            raise StoreClosed("the upload buffer pool is closed")
        committer = self._committers.get(id(segment))
        if committer is None:
            if segment.sealed:
                raise SegmentSealed("segment is sealed", segment=str(segment.path))
            size = segment.commit_size
            if size is None:
                size = self.options.chunk_size
            committer = self._committers[id(segment)] = SegmentCommitter(
                segment, size, self._shared)
            return committer
        if committer.detaching:
            raise StoreClosed(f"segment {committer.label} is being detached from the pool")
        committer.surface()
        return committer

    def _place(self, committer: SegmentCommitter, body: bytes) -> int:
        self._budget.placed(len(body))
        position = committer.place(body)
        self._make_room(0)
        return position
