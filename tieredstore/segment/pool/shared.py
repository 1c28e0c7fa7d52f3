"""PoolShared: what the committers of one pool share, and the pool's tallies of them.

The pool decides *when* bytes are due (budget, group commit, room); each
:class:`~tieredstore.segment.pool.committer.SegmentCommitter` decides *how*
its segment's due bytes are committed. Between the two sit the few things
every committer touches: the byte budget they release into, the one
group-commit timer, the upload slots that bound commits in flight across
segments, the set of worker tasks, the metrics, and three running counts the
pool's room-making reads on every append (kept up to date by the committers,
not summed over them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from tieredstore.errors import BufferFull
from tieredstore.segment.pool.budget import Budget
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.options import PoolOptions
from tieredstore.segment.pool.sink import LogSink
from tieredstore.segment.pool.timer import GroupCommitTimer
from tieredstore.tasks import Background

# The committers: the pool's are SegmentCommitters, which import this room.
C = TypeVar("C", bound=Hashable)


class PoolShared(Generic[C]):
    """Budget, timer, slots, tasks, metrics and tallies of one pool; ``C`` is
    the committer that the group-commit timer holds."""

    __slots__ = ("budget", "errored", "inflight", "log_sink", "metrics", "not_due", "options",
                 "slots", "tasks", "timer", "writer_check")

    def __init__(self, budget: Budget, metrics: PoolMetrics, options: PoolOptions,
                 interval_passed: Callable[[list[C]], None]) -> None:
        self.budget = budget
        self.metrics = metrics
        self.options = options
        self.not_due = 0  # bytes of healthy buffers not yet due for commit
        self.errored = 0  # bytes of buffers stopped by an error
        self.inflight = 0  # commits running now
        # Committers with bytes not yet due, from their oldest such byte on.
        self.timer: GroupCommitTimer[C] = GroupCommitTimer(
            options.group_commit_interval, interval_passed)
        self.log_sink: LogSink | None = None  # write mode log: small commits go here
        # Awaited before each commit to a segment, with when its bytes were taken.
        self.writer_check: Callable[[float], Awaitable[None]] | None = None
        # Commits in flight, all segments.
        self.slots = asyncio.Semaphore(options.upload_concurrency)
        self.tasks = Background()  # the commit workers

    def hand_off(self) -> None:
        """Sleep ``thread_handoff`` seconds if commits are in flight: a commit
        running in a worker thread (``ObjectStore.runs_in_threads``) waits for
        the GIL at each of its system calls, up to the switch interval (5 ms)
        while this thread computes; a short sleep lets it take the GIL now."""
        if self.options.thread_handoff > 0 and self.inflight:
            time.sleep(self.options.thread_handoff)

    def stuck(self, n: int) -> BufferFull:
        """The error for ``n`` bytes that cannot fit beside the stopped segments' bytes."""
        return BufferFull(
            f"{self.errored} of {self.budget.limit} pool bytes belong to segments whose commits "
            f"stopped, {n} more cannot fit until they are flushed or detached"
        )

    def fail_stuck_waiters(self) -> None:
        """Raise :meth:`stuck` in each waiting append that can no longer fit."""
        limit = self.budget.limit
        self.budget.fail_waiters(
            lambda need: self.stuck(need) if self.errored + need > limit else None)
