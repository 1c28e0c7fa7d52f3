"""Values of the upload buffer pool: its options, append results, its errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tieredstore.errors import SegmentError, TieredStoreError, check_field
from tieredstore.objectstore.base import MIN_PART_SIZE
from tieredstore.segment.options import SegmentOptions
from tieredstore.sizes import MiB


@dataclass(frozen=True, slots=True)
class PoolOptions:
    """How much the pool holds and how it commits.

    ``budget_bytes`` bounds every byte appended and not yet committed, across
    all segments (bytes being uploaded count until their commit lands).
    512 MiB by default: 64 busy queues need about 64 x 5 MiB not yet due
    under ``high_water`` for their commits to reach S3's part minimum
    (``direct_commit_size``) before the pool's room-making commits them
    (measured, ``bench busy_queues``: 2.1x the data uploaded with 64 MiB,
    1.6x with 256 MiB). A budget, not an allocation: a host holds that much
    only while its producers outrun the uploads (RSS about 1.3x the bytes
    held, BENCHMARKS.md *Memory*; the sync store's outbox may hold as much
    again), and a quiet host holds a few group commits' worth.
    ``chunk_size`` cuts the commits of segments whose ``commit_size`` is None
    (a ``ChunkedSegment`` says its own chunk size). Above ``high_water`` x
    budget of bytes not yet due for commit, the pool makes room by
    committing the largest buffers until at most ``low_water`` x budget are
    left. ``chunk_wait``: seconds a segment's bytes may wait for a full chunk
    (log mode: for ``direct_commit_size``) when a group commit comes, if their
    rate will make one by then (0: never; see
    :meth:`SegmentCommitter.waits_for_chunk`). 10 s by default, so that a
    busy queue's bytes are uploaded once, as chunks, instead of into log
    objects and again into chunks (64 busy queues: 1.1x the data instead of
    2.1x). What it costs: held bytes become durable, their messages visible
    to other processes reading the bucket and their offsets part of
    ``commit_offset``, up to ``chunk_wait`` after their append instead of one
    ``group_commit_interval`` (a busy queue's consume-queue units are held as
    long when no log object is written anyway, up to ``chunk_wait`` after
    their records landed, see :meth:`UploadBufferPool._interval_passed`;
    readers in other processes do not wait for them, they read the commit
    log's durable tail: docs/reading.md, "The durable tail"); a
    crash loses up to that much of what was appended and not flushed. The host's
    own reads see the bytes at once (they are read from the pool), and
    ``flush()``, a roll and ``close()`` never wait (they make every byte due;
    a detach hands the bytes back to its owner). ``thread_handoff``: seconds a
    producer that appends without waiting sleeps, once per ``YIELD_BYTES``,
    while commits are in flight on an object store that runs them in worker
    threads (``ObjectStore.runs_in_threads``): long enough for such a thread,
    waiting for the GIL, to take it (0: never). ``direct_commit_size``
    (write mode log): a commit of at least this many bytes goes to its
    segment as a chunk, full or not, never into a log object; S3's part
    minimum by default, the smallest chunk a merge copies server-side (see
    :meth:`SegmentCommitter._to_log`). A full chunk becomes due only with
    that many bytes behind it, and a commit takes up to that many past a
    chunk (:meth:`SegmentCommitter._keep`), so that a flush's remainder
    joins a chunk instead of going into a log object.

    No retry settings: the object store's chokepoint retries each request; a
    commit that fails after that is reported, and its bytes are committed
    again at the next flush or group commit (see
    :mod:`tieredstore.segment.pool.committer`).
    """

    budget_bytes: int = 512 * MiB
    chunk_size: int = SegmentOptions().chunk_size
    group_commit_interval: float = 0.2
    chunk_wait: float = 10.0
    direct_commit_size: int = MIN_PART_SIZE
    thread_handoff: float = 0.0
    upload_concurrency: int = 16
    high_water: float = 0.75
    low_water: float = 0.5

    def __post_init__(self) -> None:
        check_field("pool_bytes", self.budget_bytes, 1)
        check_field("chunk_size", self.chunk_size, 1)
        check_field("upload_concurrency", self.upload_concurrency, 1)
        check_field("group_commit_interval", self.group_commit_interval, 0, unit=" seconds")
        check_field("chunk_wait", self.chunk_wait, 0, 3600, unit=" seconds")
        check_field("direct_commit_size", self.direct_commit_size, 1)
        check_field("thread_handoff", self.thread_handoff, 0, 0.01, unit=" seconds")
        check_field("low_water", self.low_water, 0, 1)  # first: high_water's bound
        check_field("high_water", self.high_water, self.low_water, 1,
                    bounds=f"[low_water={self.low_water}, 1]")


class AppendStatus(enum.Enum):
    """How an append that does not wait ended (RocketMQ's ``AppendResult``)."""

    OK = "ok"
    BUFFER_FULL = "buffer_full"  # the pool's budget has no room now
    FILE_FULL = "file_full"  # the file must roll first


@dataclass(frozen=True, slots=True)
class AppendResult:
    """What an append that does not wait did: appended at ``position`` (OK), or
    nothing (any other status, ``position`` None)."""

    status: AppendStatus
    position: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is AppendStatus.OK

    @staticmethod
    def at(position: int) -> AppendResult:
        return AppendResult(AppendStatus.OK, position)


BUFFER_FULL = AppendResult(AppendStatus.BUFFER_FULL)
FILE_FULL = AppendResult(AppendStatus.FILE_FULL)


class AppendTooLarge(TieredStoreError, ValueError):
    """One append is larger than the pool's whole budget: it can never be admitted."""


class CommitRetriesExhausted(SegmentError):
    """A commit of a segment failed after the object store's own retries; its
    bytes stay buffered.

    The cause is the failure. Raised once: to the flushes waiting on the
    segment, or else to its next append or flush. After that the same bytes
    are due again at the next flush, or one group-commit interval later.
    """

    def __init__(self, message: str, *, segment: str, attempts: int, buffered: int) -> None:
        super().__init__(message, segment=segment)
        self.attempts = attempts
        self.buffered = buffered
