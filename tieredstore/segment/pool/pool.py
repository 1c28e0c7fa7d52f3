"""UploadBufferPool: one byte budget for the appends of every open segment.

``append`` puts bytes in the segment's buffer and returns their position at
once; the pool commits them (``FileSegment.commit0``) later, when one of three
things makes them *due*:

- the buffer holds a full chunk (``chunk_size``): whole chunks are due, so
  chunk objects are full size and the tail waits for more bytes;
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

A commit is at most one chunk (one PUT for a ``ChunkedSegment``, so
``upload_concurrency`` bounds the PUTs in flight): the due bytes, and bytes
behind them up to a chunk (fuller objects, fewer PUTs), joined once. Commits
run concurrently across segments, one at a time per segment (a worker task
per segment while it has due bytes). Bytes leave the budget when their commit
lands.

The pool does not retry a failed commit on its own: the object store's
chokepoint already retried each request (``retry_*`` keys), so retrying here
too would multiply the attempts (a throttled chunk cost up to
``retry_max_attempts`` squared PUTs). A failed commit raises
``CommitRetriesExhausted`` once, to waiting flushes or else to the next append
or flush, and its bytes stay buffered: the next flush, or one group-commit
interval later, commits them again, the very same bytes (a lost answer may
mean the first attempt landed, and a different chunk at its key would look
like another writer's). What the pool does resolve itself is where the
segment stands after such a commit: ``CommitFailed`` drops the prefix that
landed, and a ``CommitPositionError`` that resumes ahead, inside the buffer
(our earlier commit landed, its answer lost), drops what landed and goes on.
``SegmentFenced``, ``SegmentSealed``, ``SegmentFull``, and a commit position
the buffer cannot explain stop the segment for good: its bytes stay buffered
(readable, and handed back by ``detach``) and every later append or flush of
it raises the error.

When the budget is full, ``append`` waits (first come, first served) and
``try_append`` returns ``BUFFER_FULL`` and appends nothing. An append larger
than the whole budget raises ``AppendTooLarge``: admitting it would break the
budget, waiting for it could never end.

One event loop: call the pool from the loop it first ran on.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from types import TracebackType
from typing import Any

from tieredstore.errors import (
    BufferFull,
    CommitFailed,
    CommitPositionError,
    ReadOutOfRange,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
    StoreClosed,
)
from tieredstore.segment.base import FileSegment
from tieredstore.segment.chunked import ChunkedSegment
from tieredstore.segment.pool.budget import Budget
from tieredstore.segment.pool.buffer import SegmentBuffer
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.options import (
    AppendResult,
    AppendStatus,
    AppendTooLarge,
    CommitRetriesExhausted,
    PoolOptions,
)
from tieredstore.segment.pool.timer import GroupCommitTimer

log = logging.getLogger(__name__)

# Errors after which the segment takes no more commits from us.
FATAL_ERRORS = (SegmentFenced, SegmentSealed, SegmentFull, StoreClosed)


class _Outcome(enum.Enum):
    LANDED = "landed"  # all of it
    PARTIAL = "partial"  # a prefix landed, the rest failed
    FAILED = "failed"  # nothing landed
    FATAL = "fatal"


class _Entry:
    """A segment's buffer and the pool's state for it."""

    __slots__ = ("buffer", "chunk_size", "detaching", "error", "failures", "fatal", "label",
                 "retry_length", "sched_end", "segment", "waiters", "worker")

    def __init__(self, segment: FileSegment, chunk_size: int) -> None:
        self.segment = segment
        self.label = str(segment.path)
        self.buffer = SegmentBuffer(segment.commit_position)
        self.chunk_size = chunk_size
        self.sched_end = self.buffer.start  # bytes before this are due for commit
        self.worker: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.fatal = False
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []  # flushes: (target, future)
        self.detaching = False
        # Length of a commit that failed: its retry must be the same bytes, for a
        # first attempt may have landed (answer lost), and a chunk object at the
        # same position with other bytes would look like another writer's.
        self.retry_length: int | None = None
        self.failures = 0  # failed commits in a row, since bytes last landed

    @property
    def not_due(self) -> int:
        return self.buffer.end - self.sched_end

    @property
    def runnable(self) -> bool:
        return self.error is None and not self.detaching and self.sched_end > self.buffer.start


def _as_bytes(data: bytes | bytearray | memoryview) -> bytes:
    # A caller may reuse a bytearray after append returns: keep our own copy.
    return data if isinstance(data, bytes) else bytes(data)


class UploadBufferPool:
    """Buffers appends to many segments within one byte budget; commits them."""

    def __init__(self, options: PoolOptions | None = None) -> None:
        self.options = options or PoolOptions()
        self.metrics = PoolMetrics(self.options.budget_bytes)
        self._budget = Budget(self.options.budget_bytes, self.metrics, self._make_room)
        self._entries: dict[int, _Entry] = {}  # by id(segment); the entry holds the segment
        self._not_due = 0  # bytes of healthy buffers not yet due for commit
        self._errored = 0  # bytes of buffers stopped by an error
        # Entries with bytes not yet due, from their oldest such byte on.
        self._timer: GroupCommitTimer[_Entry] = GroupCommitTimer(
            self.options.group_commit_interval, self._interval_passed)
        self._slots = asyncio.Semaphore(self.options.upload_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._inflight = 0
        self._closing = False
        self._closed = False

    # --- appending ------------------------------------------------------------

    async def append(self, segment: FileSegment, data: bytes | bytearray | memoryview) -> int:
        """Buffer ``data`` for ``segment``; return the position where it starts.

        Waits while the budget is full. Raises the segment's error if its
        commits stopped, ``StoreClosed`` after ``close``, ``AppendTooLarge``
        for more bytes than the whole budget.
        """
        entry = self._entry_for(segment)
        body = _as_bytes(data)
        n = len(body)
        if n == 0:
            return entry.buffer.end
        self._check_size(entry, n)
        if self._budget.must_wait(n):
            if self._errored + n > self._budget.limit:
                raise self._stuck(n)
            await self._budget.wait(n)
            try:
                entry = self._entry_for(segment)
            except BaseException:
                self._budget.unreserve(n)
                raise
        else:
            self._budget.reserve(n)
        return self._place(entry, body)

    def try_append(
        self, segment: FileSegment, data: bytes | bytearray | memoryview
    ) -> AppendResult:
        """Like :meth:`append` without waiting: ``BUFFER_FULL`` (nothing appended)
        when the budget has no room now, or when appends are already waiting."""
        entry = self._entry_for(segment)
        body = _as_bytes(data)
        n = len(body)
        if n == 0:
            return AppendResult(AppendStatus.OK, entry.buffer.end)
        self._check_size(entry, n)
        if self._budget.must_wait(n):
            self.metrics.buffer_full += 1
            self._make_room(n)
            return AppendResult(AppendStatus.BUFFER_FULL)
        self._budget.reserve(n)
        return AppendResult(AppendStatus.OK, self._place(entry, body))

    def append_position(self, segment: FileSegment) -> int:
        """Where the next append to ``segment`` goes: commit position + buffered bytes."""
        entry = self._entries.get(id(segment))
        return segment.commit_position if entry is None else entry.buffer.end

    # --- reading --------------------------------------------------------------

    def buffered_range(self, segment: FileSegment) -> tuple[int, int]:
        """``(start, end)`` of the bytes of ``segment`` the pool holds."""
        entry = self._entries.get(id(segment))
        if entry is None:
            return segment.commit_position, segment.commit_position
        return entry.buffer.start, entry.buffer.end

    def read_buffered(self, segment: FileSegment, position: int, length: int) -> bytes:
        """Appended bytes ``[position, position + length)`` not yet dropped from the
        buffer (all within :meth:`buffered_range`), committed or not."""
        entry = self._entries.get(id(segment))
        if entry is None:
            start = segment.commit_position
            if length == 0 and position == start:
                return b""
            raise ReadOutOfRange(
                f"buffered read [{position}, {position + length}): nothing is buffered",
                segment=str(segment.path),
            )
        return entry.buffer.read(position, length, segment=entry.label)

    async def read(self, segment: FileSegment, position: int, length: int) -> bytes:
        """Bytes ``[position, position + length)`` of ``segment``, committed or buffered."""
        entry = self._entries.get(id(segment))
        if entry is None or position + length <= entry.buffer.start:
            return await segment.read0(position, length)
        start = entry.buffer.start
        tail_from = max(position, start)
        # Copy the buffered part first: once we await, it may be dropped as committed.
        tail = entry.buffer.read(tail_from, position + length - tail_from, segment=entry.label)
        if position >= start:
            return tail
        return await segment.read0(position, start - position) + tail

    # --- flushing and closing -----------------------------------------------

    async def flush(self, segment: FileSegment | None = None) -> None:
        """Return when everything appended before the call (to ``segment``, or to
        every segment) is committed; raise what stopped it otherwise.

        With several failed segments, the others still complete; the first
        error is raised and the rest are logged.
        """
        if segment is not None:
            entry = self._entries.get(id(segment))
            if entry is not None:
                await self._flush_entry(entry)
            return
        entries = [e for e in self._entries.values() if e.buffer.size or e.error is not None]
        results = await asyncio.gather(*(self._flush_entry(e) for e in entries),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, Exception):
                raise error
        if errors:
            for error in errors[1:]:
                log.warning("flush failed too: %r", error)
            raise errors[0]

    async def _flush_entry(self, entry: _Entry) -> None:
        self._surface(entry)
        target = entry.buffer.end
        if entry.buffer.start >= target:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry.waiters.append((target, fut))
        self._schedule(entry, target, "flush")
        await fut

    async def detach(self, segment: FileSegment) -> bytes:
        """Stop buffering for ``segment`` (after flushing it, before sealing or rolling).

        Waits for a commit in flight. Returns the bytes that were never
        committed, now the caller's (empty after a successful flush), and
        releases them from the budget.
        """
        entry = self._entries.get(id(segment))
        if entry is None:
            return b""
        entry.detaching = True
        while entry.worker is not None:
            await asyncio.wait({entry.worker})
        if self._entries.get(id(segment)) is not entry:
            return b""
        del self._entries[id(segment)]
        self._timer.discard(entry)
        size = entry.buffer.size
        if entry.error is None:
            self._not_due -= entry.not_due
        else:
            self._errored -= size
        leftover = entry.buffer.take_all()
        self._fail_flushes(entry, StoreClosed(
            f"segment {entry.label} was detached with {size} bytes not committed"))
        if leftover:
            log.warning("detached %s with %d bytes not committed", entry.label, size)
        self._budget.release(size)
        return leftover

    async def close(self) -> None:
        """Flush everything, wait for commits in flight, stop the timer.

        Appends after (or waiting during) close raise ``StoreClosed``. If the
        flush fails its error is raised, after everything has stopped; the
        bytes it could not commit stay readable and ``detach`` hands them back.
        """
        if self._closed:
            return
        self._closing = True
        self._timer.stop()
        self._budget.fail_waiters(lambda _: StoreClosed("the upload buffer pool was closed"))
        try:
            await self.flush()
        finally:
            while self._tasks:
                await asyncio.wait(set(self._tasks))
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
            segments=len(self._entries),
            bytes_not_due=self._not_due,
            bytes_errored=self._errored,
            waiting_appends=self._budget.waiting,
            commits_in_flight=self._inflight,
            failed_segments=sum(1 for e in self._entries.values() if e.error is not None),
        )
        return out

    @property
    def bytes_in_use(self) -> int:
        """Bytes admitted and not yet committed (or handed back); at most the budget."""
        return self._budget.in_use

    # --- budget ----------------------------------------------------------------

    def _check_size(self, entry: _Entry, n: int) -> None:
        if n > self._budget.limit:
            raise AppendTooLarge(
                f"{entry.label}: an append of {n} bytes is larger than the whole upload "
                f"buffer pool ({self._budget.limit} bytes, config 'pool_bytes')"
            )

    def _stuck(self, n: int) -> BufferFull:
        return BufferFull(
            f"{self._errored} of {self._budget.limit} pool bytes belong to segments whose commits "
            f"stopped, {n} more cannot fit until they are flushed or detached"
        )

    def _make_room(self, need: int) -> None:
        """Make the largest buffers due until, once their commits land, ``need`` more
        bytes fit and at most ``low_water`` x budget are left not due."""
        opts = self.options
        limit = self._budget.limit
        held = self._errored + self._budget.reserved  # bytes no commit of ours will free
        if self._not_due == 0 or (self._not_due + need <= opts.high_water * limit
                and self._not_due + held + need <= limit):
            return
        target = min(opts.low_water * limit - need, limit - held - need)
        candidates = [e for e in self._entries.values()
                      if e.not_due > 0 and e.error is None and not e.detaching]
        candidates.sort(key=lambda e: e.not_due, reverse=True)
        for entry in candidates:
            if self._not_due <= target:
                break
            self._schedule(entry, entry.buffer.end, "room")

    # --- entries, placement, due bytes -----------------------------------------

    def _entry_for(self, segment: FileSegment) -> _Entry:
        if self._closing:
            raise StoreClosed("the upload buffer pool is closed")
        entry = self._entries.get(id(segment))
        if entry is None:
            if segment.sealed:
                raise SegmentSealed("segment is sealed", segment=str(segment.path))
            chunk = (segment.options.chunk_size if isinstance(segment, ChunkedSegment)
                     else self.options.chunk_size)
            entry = self._entries[id(segment)] = _Entry(segment, chunk)
            return entry
        if entry.detaching:
            raise StoreClosed(f"segment {entry.label} is being detached from the pool")
        self._surface(entry)
        return entry

    def _surface(self, entry: _Entry) -> None:
        """Raise the entry's error; a retryable one only once."""
        error = entry.error
        if error is None:
            return
        if not entry.fatal:
            self._clear_error(entry)
        raise error

    def _place(self, entry: _Entry, body: bytes) -> int:
        n = len(body)
        self._budget.placed(n)
        interval = self.options.group_commit_interval
        if entry.not_due == 0 and interval > 0:
            self._timer.add(entry)
        position = entry.buffer.push(body)
        self._not_due += n
        self.metrics.appends += 1
        self.metrics.bytes_appended += n
        chunk = entry.chunk_size
        if entry.not_due >= chunk:
            self._schedule(entry, entry.sched_end + entry.not_due // chunk * chunk, "chunk")
        if interval <= 0:
            self._schedule(entry, entry.buffer.end, "interval")
        self._make_room(0)
        return position

    def _schedule(self, entry: _Entry, to: int, trigger: str | None) -> None:
        """Make the entry's bytes before ``to`` due, and see that a worker commits them."""
        to = min(to, entry.buffer.end)
        if to <= entry.sched_end:
            return
        if entry.error is None:
            self._not_due -= to - entry.sched_end
        entry.sched_end = to
        if to == entry.buffer.end:
            self._timer.discard(entry)
        if trigger is not None:
            self.metrics.scheduled_by[trigger] += 1
        if entry.worker is None and entry.runnable:
            entry.worker = asyncio.get_running_loop().create_task(
                self._drain(entry), name=f"commit {entry.label}")
            self._tasks.add(entry.worker)
            entry.worker.add_done_callback(self._tasks.discard)

    def _interval_passed(self, entry: _Entry) -> None:
        self._schedule(entry, entry.buffer.end, "interval")

    # --- committing -------------------------------------------------------------

    async def _drain(self, entry: _Entry) -> None:
        """Commit the entry's due bytes, one commit at a time, until done or one fails.

        A failure is not retried here (the chokepoint retried its requests): it
        is reported, and the bytes wait for the next flush or group commit.
        """
        try:
            while entry.runnable:
                async with self._slots:
                    if not entry.runnable:
                        break
                    outcome, error = await self._commit_once(entry)
                if outcome is _Outcome.LANDED:
                    continue
                if outcome is _Outcome.FATAL:
                    break
                entry.failures = 1 if outcome is _Outcome.PARTIAL else entry.failures + 1
                failed = CommitRetriesExhausted(
                    f"a commit at {entry.buffer.start} failed after the object store's "
                    f"retries ({entry.failures} in a row), with {error!r}; "
                    f"{entry.buffer.size} bytes stay buffered for the next flush",
                    segment=entry.label, attempts=entry.failures, buffered=entry.buffer.size,
                )
                failed.__cause__ = error
                self._set_error(entry, failed, fatal=False)
                break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: stop the segment, keep its bytes
            log.exception("commit worker of %s failed", entry.label)
            if entry.error is None:
                self._set_error(entry, exc, fatal=True)
        finally:
            entry.worker = None

    async def _commit_once(self, entry: _Entry) -> tuple[_Outcome, BaseException | None]:
        buf = entry.buffer
        if entry.retry_length is not None:
            self.metrics.retries += 1  # the bytes of a failed commit, sent again
        length = entry.retry_length or min(buf.size, entry.chunk_size)
        entry.retry_length = None
        # Bytes behind the due ones ride along up to a chunk: fuller objects, fewer PUTs.
        self._schedule(entry, buf.start + length, None)
        body = buf.head(length)
        position = buf.start
        self._inflight += 1
        started = time.perf_counter()
        try:
            await entry.segment.commit0(position, body)
        except CommitFailed as exc:
            self.metrics.commit_errors[type(exc.__cause__ or exc).__name__] += 1
            landed = exc.resume_position - position
            if not 0 <= landed <= length:
                return self._inconsistent(entry, exc, position)
            if landed:
                self._landed(entry, landed)
            if landed < length:
                entry.retry_length = length - landed
            return (_Outcome.PARTIAL if landed else _Outcome.FAILED), exc
        except CommitPositionError as exc:
            if position < exc.resume_position <= buf.end:
                # Our bytes up to there are in the segment already (an answer was lost).
                self._landed(entry, exc.resume_position - position)
                return _Outcome.LANDED, None
            return self._inconsistent(entry, exc, position)
        except FATAL_ERRORS as exc:
            self._set_error(entry, exc, fatal=True)
            return _Outcome.FATAL, exc
        except Exception as exc:
            self.metrics.commit_errors[type(exc).__name__] += 1
            entry.retry_length = length
            return _Outcome.FAILED, exc
        finally:
            self._inflight -= 1
        self.metrics.commit(time.perf_counter() - started, length)
        self._landed(entry, length)
        return _Outcome.LANDED, None

    def _inconsistent(
        self, entry: _Entry, exc: CommitFailed | CommitPositionError, position: int
    ) -> tuple[_Outcome, BaseException]:
        exc.add_note(
            f"the pool holds [{position}, {entry.buffer.end}) of {entry.label} and the "
            f"segment resumes at {exc.resume_position}: the two disagree, commits stop"
        )
        self._set_error(entry, exc, fatal=True)
        return _Outcome.FATAL, exc

    def _landed(self, entry: _Entry, n: int) -> None:
        entry.failures = 0
        buf = entry.buffer
        self._schedule(entry, buf.start + n, None)
        buf.drop(n)
        for target, fut in entry.waiters:
            if target <= buf.start and not fut.done():
                fut.set_result(None)
        entry.waiters = [w for w in entry.waiters if not w[1].done()]
        self._budget.release(n)

    # --- errors -------------------------------------------------------------------

    def _set_error(self, entry: _Entry, error: BaseException, *, fatal: bool) -> None:
        if entry.error is not None:
            return
        log.warning("commits of %s stopped (%s): %s", entry.label,
                    "for good" if fatal else "until retried", error)
        self.metrics.segment_errors[type(error).__name__] += 1
        entry.error = error
        entry.fatal = fatal
        self._not_due -= entry.not_due
        self._errored += entry.buffer.size
        self._timer.discard(entry)
        if self._fail_flushes(entry, error) and not fatal:
            self._clear_error(entry)  # surfaced: the bytes are due again at the next trigger
        limit = self._budget.limit
        self._budget.fail_waiters(
            lambda need: self._stuck(need) if self._errored + need > limit else None)

    def _clear_error(self, entry: _Entry) -> None:
        entry.error = None
        self._errored -= entry.buffer.size
        entry.sched_end = entry.buffer.start
        self._not_due += entry.buffer.size
        if entry.buffer.size:  # due again one group-commit interval from now
            self._timer.add(entry)

    def _fail_flushes(self, entry: _Entry, error: BaseException) -> bool:
        """Raise ``error`` in the flushes waiting on ``entry``; whether there were any."""
        delivered = False
        for _, fut in entry.waiters:
            if not fut.done():
                fut.set_exception(error)
                delivered = True
        entry.waiters = []
        return delivered
