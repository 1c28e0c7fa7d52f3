"""SegmentCommitter: one segment's buffered bytes, and the worker that commits them.

The pool puts appended bytes here and says how far they are *due*
(:meth:`SegmentCommitter.schedule`); the committer commits due bytes with
``FileSegment.commit0``, one commit at a time, in a worker task that runs
while it has due bytes (commits of different segments run concurrently, up to
the pool's upload slots). A commit is at most ``commit_size`` bytes (the
segment's ``FileSegment.commit_size``, else the pool's ``chunk_size``; one
PUT for a ``ChunkedSegment``): the due bytes, and bytes behind them up to
that size (fuller objects, fewer PUTs), joined once. Bytes leave the budget
when their commit lands; flushes waiting for them are woken then.

A failed commit is not retried here: the object store's chokepoint already
retried each request (``retry_*`` keys), so retrying here too would multiply
the attempts (a throttled chunk cost up to ``retry_max_attempts`` squared
PUTs). It raises ``CommitRetriesExhausted`` once, to waiting flushes or else
to the next append or flush, and its bytes stay buffered: the next flush, or
one group-commit interval later, commits them again, the very same bytes (a
lost answer may mean the first attempt landed, and a different chunk at its
key would look like another writer's). What the committer does resolve
itself is where the segment stands after such a commit: ``CommitFailed``
drops the prefix that landed, and a ``CommitPositionError`` that resumes
ahead, inside the buffer (our earlier commit landed, its answer lost), drops
what landed and goes on. ``SegmentFenced``, ``SegmentSealed``,
``SegmentFull``, and a commit position the buffer cannot explain stop the
segment for good: its bytes stay buffered (readable, and handed back by
:meth:`SegmentCommitter.take_back`) and every later append or flush of it
raises the error.
"""

from __future__ import annotations

import asyncio
import logging
import time

from tieredstore.errors import (
    CommitFailed,
    CommitPositionError,
    Fenced,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
    StoreClosed,
)
from tieredstore.segment.base import FileSegment
from tieredstore.segment.pool.buffer import SegmentBuffer
from tieredstore.segment.pool.options import CommitRetriesExhausted
from tieredstore.segment.pool.shared import PoolShared
from tieredstore.tasks import Priority

log = logging.getLogger(__name__)

# Errors after which the segment takes no more commits from us.
FATAL_ERRORS = (SegmentFenced, SegmentSealed, SegmentFull, StoreClosed)


class SegmentCommitter:
    """The bytes of one segment not yet committed, and their commit state.

    Bytes before ``due_end`` are due for commit; ``error`` stops commits
    (``fatal``: for good, else until it has been raised once).
    """

    __slots__ = ("_shared", "buffer", "chunk_filled", "chunk_rate", "commit_size", "detaching",
                 "due_end", "error", "failures", "fatal", "label", "last", "not_due_since",
                 "retry_direct", "retry_length", "segment", "waiters", "worker")

    def __init__(self, segment: FileSegment, commit_size: int,
                 shared: PoolShared[SegmentCommitter]) -> None:
        self.segment = segment
        self.label = str(segment.path)
        self.buffer = SegmentBuffer(segment.commit_position)
        self.commit_size = commit_size
        self.due_end = self.buffer.start  # bytes before this are due for commit
        self.worker: asyncio.Task[None] | None = None
        self.error: BaseException | None = None
        self.fatal = False
        self.waiters: list[tuple[int, asyncio.Future[None]]] = []  # flushes: (target, future)
        self.detaching = False
        # Length of a commit that failed: its retry must be the same bytes, for a
        # first attempt may have landed (answer lost), and a chunk object at the
        # same position with other bytes would look like another writer's.
        self.retry_length: int | None = None
        # Whether that commit went to the segment (not the log): its retry does too,
        # whatever its length, for a chunk in doubt may stand (docs/log-objects.md).
        self.retry_direct = False
        self.failures = 0  # failed commits in a row, since bytes last landed
        # The segment takes no more bytes (a roll flushes it before its seal): its
        # last commits go to it, not to the log (:meth:`_to_log`).
        self.last = False
        self.not_due_since: float | None = None  # loop time of the oldest byte not yet due
        # Bytes per second at which the last full chunk filled (0: none has yet),
        # and the loop time it filled.
        self.chunk_rate = 0.0
        self.chunk_filled = 0.0
        self._shared = shared

    @property
    def not_due(self) -> int:
        """Buffered bytes not yet due for commit."""
        return self.buffer.end - self.due_end

    @property
    def runnable(self) -> bool:
        """Whether a worker has due bytes to commit."""
        return self.error is None and not self.detaching and self.due_end > self.buffer.start

    # --- what the pool calls ------------------------------------------------------

    def surface(self) -> None:
        """Raise the error that stopped commits; a retryable one only once."""
        error = self.error
        if error is None:
            return
        if not self.fatal:
            self._clear_error()
        raise error

    def place(self, body: bytes) -> int:
        """Buffer ``body`` (admitted by the budget already); return its position.

        Whole ``commit_size`` runs become due at once, but for the bytes
        :meth:`_keep` leaves behind them (log mode: ``direct_commit_size``), and
        everything does with no group-commit interval.
        """
        shared = self._shared
        n = len(body)
        interval = shared.options.group_commit_interval
        if self.not_due == 0:
            self.not_due_since = asyncio.get_running_loop().time()
            if interval > 0:
                shared.timer.add(self)
        position = self.buffer.push(body)
        shared.not_due += n
        shared.metrics.appends += 1
        shared.metrics.bytes_appended += n
        size, keep = self.commit_size, self._keep()
        if self.not_due >= size + keep:
            self.schedule(self.due_end + (self.not_due - keep) // size * size, "chunk")
        if interval <= 0:
            self.schedule(self.buffer.end, "interval")
        return position

    def schedule(self, to: int, trigger: str | None) -> None:
        """Make the bytes before ``to`` due (counted under ``trigger``), and see
        that a worker commits them."""
        shared = self._shared
        to = min(to, self.buffer.end)
        if to <= self.due_end:
            return
        if trigger == "chunk" and self.not_due_since is not None:
            # The rate the bytes not yet due arrived at since the oldest; what is
            # left behind the chunk arrived last, at that rate.
            now = asyncio.get_running_loop().time()
            self.chunk_rate = self.not_due / max(now - self.not_due_since, 1e-3)
            self.chunk_filled = now
            self.not_due_since = now - (self.buffer.end - to) / self.chunk_rate
        if self.error is None:
            shared.not_due -= to - self.due_end
        self.due_end = to
        if to == self.buffer.end:
            shared.timer.discard(self)
            self.not_due_since = None
        if trigger is not None:
            shared.metrics.scheduled_by[trigger] += 1
        if self.worker is None and self.runnable:
            self.worker = shared.tasks.spawn(self._drain(), f"commit {self.label}",
                                            priority=Priority.HOST)

    def interval_passed(self, *, ride: bool = False) -> bool:
        """The group-commit interval of the oldest byte not yet due has passed:
        make the bytes due, or let them wait (:meth:`waits_for_chunk`); whether
        they went into a log object. ``ride``: a log object is being written
        anyway, and a derived segment's bytes go with it, whatever their wait."""
        if not (ride and self.segment.derived) and self.waits_for_chunk(
                asyncio.get_running_loop().time()):
            self._shared.timer.add(self)  # looked at again one interval from now
            return False
        to_log = self._to_log(self._next_length())
        self.schedule(self.buffer.end, "interval")
        return to_log

    def waits_for_chunk(self, now: float) -> bool:
        """Whether the bytes not yet due, at the rate they arrived since the oldest,
        make a full chunk before that one is the pool's ``chunk_wait`` old, or, if
        they are short of a commit that goes to the segment (in the log mode:
        ``direct_commit_size``, if smaller than a chunk), make that: then a
        group commit leaves them (one upload, as a chunk, instead of a partial
        commit now, into a log object, and the rest later). The rate is the
        faster of the bytes since the oldest and the last full chunk's, if that
        filled within ``chunk_wait``:
        a producer stalled for a moment (the loop busy uploading that chunk) does
        not make a busy segment look quiet. A derived segment's bytes
        (``FileSegment.derived``: rebuilt from another file after a crash) wait
        that long whatever their rate (unless they ride a log object written
        anyway: :meth:`interval_passed`). Never while a flush waits on them."""
        wait, since, n = self._shared.options.chunk_wait, self.not_due_since, self.not_due
        if wait <= 0 or since is None or n <= 0 or self.waiters:
            return False
        age = now - since
        if age >= wait:
            return False
        if self.segment.derived:
            fills = True
        else:
            recent = now - self.chunk_filled <= wait  # an old chunk says nothing of now
            rate = max(n / max(age, 1e-3), self.chunk_rate if recent else 0.0)
            # A full chunk in time (fewest PUTs), or else, if they are short of
            # one, a commit that goes to the segment (not into a log object).
            short = self._direct_size() - n
            fills = age + max(self.commit_size - n, 0) / rate <= wait or (
                short > 0 and age + short / rate <= wait)
        if fills:
            self._shared.metrics.waited_for_chunk += 1
        return fills

    async def flush(self, until: int | None = None, *, last: bool = False) -> None:
        """Make every buffered byte due; return when those before ``until`` (or all)
        land. ``last``: the segment takes no more bytes after these."""
        self.surface()
        self.last = self.last or last
        target = self.buffer.end
        wait_for = target if until is None else min(until, target)
        if self.buffer.start >= wait_for:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.waiters.append((wait_for, fut))
        self.schedule(target, "flush")
        await fut

    async def stop(self) -> None:
        """Start no more commits; wait for the one in flight."""
        self.detaching = True
        while self.worker is not None:
            await asyncio.wait({self.worker})

    def take_back(self) -> bytes:
        """After :meth:`stop`: hand back the bytes never committed, release them
        from the budget, and fail the flushes still waiting."""
        shared = self._shared
        shared.timer.discard(self)
        size = self.buffer.size
        if self.error is None:
            shared.not_due -= self.not_due
        else:
            shared.errored -= size
        leftover = self.buffer.take_all()
        self._fail_flushes(StoreClosed(
            f"segment {self.label} was detached with {size} bytes not committed"))
        if leftover:
            log.warning("detached %s with %d bytes not committed", self.label, size)
        shared.budget.release(size)
        return leftover

    # --- the worker ---------------------------------------------------------------

    async def _drain(self) -> None:
        """Commit the due bytes, one commit at a time, until done or one fails.

        A failure is not retried here (the chokepoint retried its requests): it
        is reported, and the bytes wait for the next flush or group commit.
        """
        try:
            while self.runnable:
                if self._to_log(self._next_length()):
                    # A log object is one PUT for every segment's commit: no slot.
                    error = await self._commit_once()
                else:
                    async with self._shared.slots:
                        if not self.runnable:
                            break
                        error = await self._commit_once()
                if error is None:
                    continue
                if self.error is not None:  # stopped for good
                    break
                self.failures += 1  # from 0 when a prefix landed
                failed = CommitRetriesExhausted(
                    f"a commit at {self.buffer.start} failed after the object store's "
                    f"retries ({self.failures} in a row), with {error!r}; "
                    f"{self.buffer.size} bytes stay buffered for the next flush",
                    segment=self.label, attempts=self.failures, buffered=self.buffer.size,
                )
                failed.__cause__ = error
                self._set_error(failed, fatal=False)
                break
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours: stop the segment, keep its bytes
            log.exception("commit worker of %s failed", self.label)
            if self.error is None:
                self._set_error(exc, fatal=True)
        finally:
            self.worker = None

    def _next_length(self) -> int:
        """A commit of ``commit_size``, or of every buffered byte if fewer than
        ``commit_size`` + :meth:`_keep` (a remainder that would go into a log
        object joins the chunk: one object, uploaded once)."""
        if self.retry_length:
            return self.retry_length
        n, size = self.buffer.size, self.commit_size
        return n if n < size + self._keep() else size

    def _keep(self) -> int:
        """Bytes a full chunk leaves behind it when it becomes due: in the log
        mode ``direct_commit_size`` (if under a chunk), so that a flush or group
        commit coming after it finds at least that much and commits it to the
        segment, where a remainder under ``direct_commit_size`` would go into a
        log object and be uploaded again into a chunk; 0 in the direct mode."""
        direct = self._direct_size()
        return direct if direct < self.commit_size else 0

    def _direct_size(self) -> int:
        """The smallest commit that goes to the segment: a chunk, or in the log
        mode ``direct_commit_size`` if that is smaller."""
        if self._shared.log_sink is None:
            return self.commit_size
        return min(self.commit_size, self._shared.options.direct_commit_size)

    def _to_log(self, length: int) -> bool:
        """Whether a commit of ``length`` bytes goes to the log sink.

        The retry of a commit goes where its first attempt went. Else only a
        commit smaller than a chunk and than the pool's ``direct_commit_size``
        (S3's part minimum, 5 MiB, by default) does, and not the last bytes of
        a segment (``last``: a roll's tail, which its seal would move from the
        log into a chunk anyway). One at least that long goes to its segment
        as a chunk (``commit0``), full or not: a merge copies it server-side
        (``tieredstore.segment.planner``), so its bytes are uploaded once, where
        in a log object they would be uploaded again by compaction.
        """
        sink = self._shared.log_sink
        if self.retry_length is not None:
            if self.retry_direct:
                return False
        elif self.last:
            return False
        return sink is not None and length < self._direct_size() and sink.accepts(self.segment)

    async def _commit_once(self) -> BaseException | None:
        """One commit of the next bytes: None once all of them landed, else the
        error (one that stops the segment for good has set ``error``)."""
        shared, metrics, buf = self._shared, self._shared.metrics, self.buffer
        if self.retry_length is not None:
            metrics.retries += 1  # the bytes of a failed commit, sent again
        length = self._next_length()
        sink = shared.log_sink if self._to_log(length) else None
        self.retry_length = None
        self.retry_direct = sink is None
        # Bytes behind the due ones ride along up to a commit: fuller objects, fewer PUTs.
        self.schedule(buf.start + length, None)
        taken = time.monotonic()
        body = buf.head(length)
        position = buf.start
        shared.inflight += 1
        started = time.perf_counter()
        try:
            if sink is not None:
                await sink.put(self.segment, position, body)
            else:
                if shared.writer_check is not None:
                    await self._check_writer(taken)
                asyncio.get_running_loop().call_soon(self._join_ahead, position + length)
                await self.segment.commit0(position, body)
        except CommitFailed as exc:
            metrics.commit_errors[type(exc.__cause__ or exc).__name__] += 1
            landed = exc.resume_position - position
            if not 0 <= landed <= length:
                return self._inconsistent(exc, position)
            if landed:
                self._landed(landed)
            if landed < length:
                self.retry_length = length - landed
            return exc
        except CommitPositionError as exc:
            if position < exc.resume_position <= buf.end:
                # Our bytes up to there are in the segment already (an answer was lost).
                self._landed(exc.resume_position - position)
                return None
            return self._inconsistent(exc, position)
        except FATAL_ERRORS as exc:
            self._set_error(exc, fatal=True)
            return exc
        except Exception as exc:
            metrics.commit_errors[type(exc).__name__] += 1
            self.retry_length = length
            return exc
        finally:
            shared.inflight -= 1
        metrics.commit(time.perf_counter() - started, length)
        self._landed(length)
        return None

    async def _check_writer(self, taken: float) -> None:
        """The writer check for bytes taken at ``taken``: a newer store took the
        broker over (any ``Fenced``) fences this segment."""
        assert self._shared.writer_check is not None
        try:
            await self._shared.writer_check(taken)
        except SegmentFenced:
            raise
        except Fenced as exc:
            raise SegmentFenced(str(exc), segment=self.label) from exc

    def _join_ahead(self, position: int) -> None:
        """While a chunk uploads, join the next one if its bytes are here: its
        commit then starts the moment this one lands, not after its join."""
        buf, size = self.buffer, self.commit_size
        # That commit is one chunk if enough bytes are behind it (:meth:`_next_length`).
        if (buf.start <= position and position + size <= self.due_end
                and position + size + self._keep() <= buf.end):
            self._shared.hand_off()  # the upload's thread first, to its system calls
            buf.join(position, size)

    def _inconsistent(self, exc: CommitFailed | CommitPositionError, position: int
                      ) -> BaseException:
        exc.add_note(
            f"the pool holds [{position}, {self.buffer.end}) of {self.label} and the "
            f"segment resumes at {exc.resume_position}: the two disagree, commits stop"
        )
        self._set_error(exc, fatal=True)
        return exc

    def _landed(self, n: int) -> None:
        self.failures = 0
        buf = self.buffer
        self.schedule(buf.start + n, None)
        buf.drop(n)
        for target, fut in self.waiters:
            if target <= buf.start and not fut.done():
                fut.set_result(None)
        self.waiters = [w for w in self.waiters if not w[1].done()]
        self._shared.budget.release(n)

    # --- errors -------------------------------------------------------------------

    def _set_error(self, error: BaseException, *, fatal: bool) -> None:
        if self.error is not None:
            return
        shared = self._shared
        log.warning("commits of %s stopped (%s): %s", self.label,
                    "for good" if fatal else "until retried", error)
        shared.metrics.segment_errors[type(error).__name__] += 1
        self.error = error
        self.fatal = fatal
        shared.not_due -= self.not_due
        shared.errored += self.buffer.size
        shared.timer.discard(self)
        if self._fail_flushes(error) and not fatal:
            self._clear_error()  # surfaced: the bytes are due again at the next trigger
        shared.fail_stuck_waiters()

    def _clear_error(self) -> None:
        shared = self._shared
        self.error = None
        shared.errored -= self.buffer.size
        self.due_end = self.buffer.start
        shared.not_due += self.buffer.size
        if self.buffer.size:  # due again one group-commit interval from now
            self.not_due_since = None  # (and no waiting for a chunk: they failed once)
            shared.timer.add(self)

    def _fail_flushes(self, error: BaseException) -> bool:
        """Raise ``error`` in the flushes waiting; whether there were any."""
        delivered = False
        for _, fut in self.waiters:
            if not fut.done():
                fut.set_exception(error)
                delivered = True
        self.waiters = []
        return delivered
