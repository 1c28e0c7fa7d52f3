"""The pool's split: FileSegment.commit_size cuts commits, and a SegmentCommitter
keeps one segment's state while the pool's shared tallies stay consistent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.segment.test_pool import until
from tieredstore.errors import CommitFailed, TransientError
from tieredstore.objectstore import MIN_PART_SIZE, MemoryObjectStore
from tieredstore.segment import ChunkedSegment, FileSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.segment.pool import CommitRetriesExhausted, PoolOptions, UploadBufferPool
from tieredstore.segment.pool.budget import Budget
from tieredstore.segment.pool.committer import SegmentCommitter
from tieredstore.segment.pool.metrics import PoolMetrics
from tieredstore.segment.pool.shared import PoolShared

KiB = 1024


def seg_path(i: int) -> SegmentPath:
    return SegmentPath("c", "b", f"t{i}", 0, FileType.COMMIT_LOG, 0)


class MemorySegment(FileSegment):
    """Commits land in memory; ``fail`` commits fail first (nothing lands)."""

    def __init__(self, *, commit_size: int | None = None, fail: int = 0) -> None:
        self.path = seg_path(1)
        self.data = bytearray()
        self.commits: list[tuple[int, int]] = []
        self.fail = fail
        self._commit_size = commit_size

    @property
    def commit_position(self) -> int:
        return len(self.data)

    @property
    def commit_size(self) -> int | None:
        return self._commit_size

    @property
    def sealed(self) -> bool:
        return False

    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        self.commits.append((position, len(data)))
        if self.fail:
            self.fail -= 1
            raise TransientError("injected")
        assert position == len(self.data)
        self.data += bytes(data)

    async def read0(self, position: int, length: int) -> bytes:
        return bytes(self.data[position : position + length])

    async def seal(self, *, merge: bool | None = None) -> None:
        pass

    async def destroy(self) -> None:
        pass


def make_pool(**changes: Any) -> UploadBufferPool:
    """A pool whose group commits carry every byte (``chunk_wait`` 0, not the
    shipped 10 s) unless a test says otherwise."""
    values: dict[str, Any] = dict(budget_bytes=1024 * KiB, chunk_size=8 * KiB,
                                  group_commit_interval=60.0, chunk_wait=0.0)
    values.update(changes)
    return UploadBufferPool(PoolOptions(**values))


def test_commit_size_of_a_segment() -> None:
    assert MemorySegment().commit_size is None


async def test_chunked_segment_commits_are_cut_to_its_chunk_size() -> None:
    store = MemoryObjectStore()
    segment = await ChunkedSegment.open(store, seg_path(0),
                                        options=SegmentOptions(chunk_size=3 * KiB))
    assert segment.commit_size == 3 * KiB
    async with make_pool(chunk_size=64 * KiB) as pool:
        await pool.append(segment, b"x" * (7 * KiB))
        await pool.flush(segment)
    sizes = [o.size for o in await store.list_all(segment.path.base_dir) if "/chunk-" in o.key]
    assert sizes == [3 * KiB, 3 * KiB, 1 * KiB]


@pytest.mark.parametrize(("commit_size", "cut"), [(None, 8 * KiB), (2 * KiB, 2 * KiB)])
async def test_commits_are_cut_to_the_segment_commit_size(commit_size: int | None,
                                                          cut: int) -> None:
    segment = MemorySegment(commit_size=commit_size)
    async with make_pool() as pool:
        await pool.append(segment, b"y" * (cut + 1))  # one whole commit is due at once
        await until(lambda: pool.buffered_range(segment)[0] >= cut)
        assert segment.commits == [(0, cut)]
        assert pool.metrics.scheduled_by["chunk"] == 1
        await pool.flush(segment)
        assert segment.commits == [(0, cut), (cut, 1)]


async def test_committer_resends_the_same_bytes_and_keeps_the_tallies() -> None:
    metrics = PoolMetrics(1024 * KiB)

    def no_room(need: int) -> None:
        pass

    budget = Budget(1024 * KiB, metrics, no_room)
    shared = PoolShared(budget, metrics,
                        PoolOptions(group_commit_interval=60.0, upload_concurrency=2),
                        lambda due: [c.interval_passed() for c in due])
    segment = MemorySegment(commit_size=4 * KiB, fail=1)
    committer = SegmentCommitter(segment, 4 * KiB, shared)

    budget.reserve(3 * KiB)
    budget.placed(3 * KiB)
    assert committer.place(b"a" * (3 * KiB)) == 0
    assert (shared.not_due, shared.errored, committer.not_due) == (3 * KiB, 0, 3 * KiB)
    assert len(shared.timer) == 1

    with pytest.raises(CommitRetriesExhausted) as caught:
        await committer.flush()
    assert caught.value.buffered == 3 * KiB
    # Raised once, to the flush: the bytes are not due, back under the interval timer.
    assert committer.error is None
    assert (shared.not_due, shared.errored) == (3 * KiB, 0)
    assert len(shared.timer) == 1

    budget.reserve(1 * KiB)
    budget.placed(1 * KiB)
    committer.place(b"b" * KiB)  # a whole commit of 4 KiB is due now
    await committer.flush()
    # The failed commit's 3 KiB went again unchanged, then the rest.
    assert segment.commits == [(0, 3 * KiB), (0, 3 * KiB), (3 * KiB, 1 * KiB)]
    assert segment.data == b"a" * (3 * KiB) + b"b" * KiB
    assert metrics.retries == 1
    assert (shared.not_due, shared.errored, shared.inflight, budget.in_use) == (0, 0, 0, 0)
    assert len(shared.timer) == 0

    await committer.stop()
    assert committer.take_back() == b""
    await asyncio.sleep(0)  # the worker's done callback
    assert not shared.tasks.busy


class DerivedSegment(MemorySegment):
    @property
    def derived(self) -> bool:
        return True


async def test_a_segment_that_filled_a_chunk_waits_through_a_stall() -> None:
    """The rate a busy segment's last chunk filled at counts: its producer pausing
    (the loop busy uploading that chunk) does not send the next bytes into a
    group commit of their own."""
    segment = MemorySegment()
    async with make_pool(group_commit_interval=0.05, chunk_wait=5.0) as pool:
        for _ in range(9):  # a chunk in about 0.2 s: 40 KB/s
            await pool.append(segment, b"z" * KiB)
            await asyncio.sleep(0.025)
        await until(lambda: segment.commits == [(0, 8 * KiB)])
        # At the rate since the remainder's first byte alone (1 KiB in 1.2 s) the
        # chunk would take far past chunk_wait; at the chunk's rate, well within.
        await asyncio.sleep(1.2)
        assert segment.commits == [(0, 8 * KiB)]
        assert pool.metrics.waited_for_chunk > 0
        await pool.flush(segment)
        assert segment.commits == [(0, 8 * KiB), (8 * KiB, KiB)]


@pytest.mark.parametrize("derived", [False, True])
async def test_a_derived_segment_waits_chunk_wait_whatever_its_rate(derived: bool) -> None:
    segment = DerivedSegment() if derived else MemorySegment()
    async with make_pool(group_commit_interval=0.05, chunk_wait=1.0) as pool:
        await pool.append(segment, b"u" * 100)  # a trickle: no chunk for ages
        await asyncio.sleep(0.3)
        assert segment.commits == ([] if derived else [(0, 100)])
        await until(lambda: segment.commits == [(0, 100)])  # chunk_wait bounds the wait


class ListSink:
    """A log sink that lands every put at once, in the segment's own bytes."""

    def __init__(self) -> None:
        self.puts: list[tuple[int, int]] = []

    def accepts(self, segment: FileSegment) -> bool:
        return True

    async def put(self, segment: FileSegment, position: int, data: bytes) -> None:
        assert isinstance(segment, MemorySegment) and position == len(segment.data)
        self.puts.append((position, len(data)))
        segment.data += data


class HalfLandingSegment(MemorySegment):
    """Its first commit lands 2 KiB and fails (``CommitFailed``) with the rest."""

    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        if self.fail:
            self.fail -= 1
            self.commits.append((position, len(data)))
            self.data += bytes(data[: 2 * KiB])
            raise CommitFailed("injected", segment="s", resume_position=position + 2 * KiB)
        await super().commit0(position, data)


async def test_a_commit_of_direct_commit_size_goes_to_the_segment_not_the_log() -> None:
    """Issue 32: a partial chunk of at least ``direct_commit_size`` (S3's part
    minimum by default) is written to its segment, a smaller one to the log."""
    assert PoolOptions().direct_commit_size == MIN_PART_SIZE
    segment, sink = MemorySegment(commit_size=8 * KiB), ListSink()
    async with make_pool(direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(segment, b"a" * (3 * KiB))
        await pool.flush(segment)
        await pool.append(segment, b"b" * (5 * KiB))
        await pool.flush(segment)
        await pool.append(segment, b"c" * (4 * KiB))
        await pool.flush(segment)
    assert sink.puts == [(0, 3 * KiB)]
    assert segment.commits == [(3 * KiB, 5 * KiB), (8 * KiB, 4 * KiB)]
    assert segment.data == b"a" * (3 * KiB) + b"b" * (5 * KiB) + b"c" * (4 * KiB)


async def test_the_retry_of_a_direct_commit_goes_to_the_segment_whatever_its_length() -> None:
    """A direct commit that landed in part is retried at the segment (a chunk in
    doubt may stand), though what is left is below ``direct_commit_size``."""
    segment, sink = HalfLandingSegment(commit_size=8 * KiB, fail=1), ListSink()
    async with make_pool(direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(segment, b"d" * (5 * KiB))
        with pytest.raises(CommitRetriesExhausted):
            await pool.flush(segment)
        await pool.flush(segment)
    assert sink.puts == []
    assert segment.commits == [(0, 5 * KiB), (2 * KiB, 3 * KiB)]
    assert segment.data == b"d" * (5 * KiB)


async def test_chunk_wait_holds_bytes_until_they_make_a_direct_commit_in_the_log_mode() -> None:
    """With a log sink, a busy segment's bytes sit group commits out until they
    make ``direct_commit_size`` (not a full chunk), then go to the segment."""
    segment, sink = MemorySegment(), ListSink()
    async with make_pool(group_commit_interval=0.05, chunk_wait=1.0, chunk_size=64 * KiB,
                         direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        for _ in range(5):  # 4 KiB in about 0.1 s; a 64 KiB chunk would take 1.6 s
            await pool.append(segment, b"w" * KiB)
            await asyncio.sleep(0.025)
        await until(lambda: segment.commits != [])
        assert sink.puts == []
        assert segment.commits[0][0] == 0 and segment.commits[0][1] >= 4 * KiB
        assert pool.metrics.waited_for_chunk > 0


async def test_a_full_chunk_leaves_direct_commit_size_behind_it_in_the_log_mode() -> None:
    """Issue 32: with a log sink, a full chunk becomes due only once
    ``direct_commit_size`` more bytes are buffered behind it, and a flush
    commits a remainder under that with the chunk before it (one commit of less
    than chunk + direct_commit_size): nothing goes into the log, where it would
    be uploaded again into a chunk."""
    segment, sink = MemorySegment(commit_size=8 * KiB), ListSink()
    async with make_pool(direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(segment, b"e" * (9 * KiB))  # a chunk, 1 KiB behind it
        await asyncio.sleep(0.05)
        assert segment.commits == []
        await pool.flush(segment)  # a flush every 9 KiB: one commit each
        await pool.append(segment, b"f" * (13 * KiB))  # a chunk, 5 KiB behind it
        await until(lambda: segment.commits == [(0, 9 * KiB), (9 * KiB, 8 * KiB)])
        assert pool.metrics.scheduled_by["chunk"] == 1
        await pool.flush(segment)
    assert sink.puts == []
    assert segment.commits == [(0, 9 * KiB), (9 * KiB, 8 * KiB), (17 * KiB, 5 * KiB)]
    assert segment.data == b"e" * (9 * KiB) + b"f" * (13 * KiB)


async def test_the_direct_mode_cuts_commits_at_the_chunk_size() -> None:
    """Without a log sink nothing is kept behind a chunk: a commit is a chunk."""
    segment = MemorySegment(commit_size=8 * KiB)
    async with make_pool(direct_commit_size=4 * KiB) as pool:
        await pool.append(segment, b"g" * (9 * KiB))
        await until(lambda: segment.commits == [(0, 8 * KiB)])
        await pool.flush(segment)
    assert segment.commits == [(0, 8 * KiB), (8 * KiB, KiB)]


async def test_a_chunked_segment_joins_a_commit_tail_to_the_chunk_before_it() -> None:
    """With ``join_tail`` (the message store's segments), a commit of less than
    two chunks is one chunk object (a tail under S3's part minimum between two
    chunks could not be copied by a merge)."""
    store = MemoryObjectStore()
    segment = await ChunkedSegment.open(
        store, seg_path(0), options=SegmentOptions(chunk_size=3 * KiB, join_tail=True))
    await segment.commit0(0, b"h" * (5 * KiB))
    await segment.commit0(5 * KiB, b"i" * (9 * KiB))
    sizes = [o.size for o in await store.list_all(segment.path.base_dir) if "/chunk-" in o.key]
    assert sizes == [5 * KiB, 3 * KiB, 3 * KiB, 3 * KiB]
    assert await segment.read0(0, 14 * KiB) == b"h" * (5 * KiB) + b"i" * (9 * KiB)


async def test_a_segments_last_bytes_go_to_it_not_to_the_log() -> None:
    """Issue 32: a flush with ``last`` (a roll, before the seal) commits the tail
    to the segment as a chunk whatever its length: in a log object it would be
    moved into a chunk again by the seal."""
    segment, sink = MemorySegment(commit_size=8 * KiB), ListSink()
    async with make_pool(direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(segment, b"j" * KiB)
        await pool.flush(segment)
        await pool.append(segment, b"k" * KiB)
        await pool.flush(segment, last=True)
    assert sink.puts == [(0, KiB)]
    assert segment.commits == [(KiB, KiB)]
    assert segment.data == b"j" * KiB + b"k" * KiB


async def test_held_consume_queue_bytes_start_no_group_commit_of_their_own() -> None:
    """With ``chunk_wait``, a derived segment's interval (it starts when its
    records land, out of step with the commit log's) makes no group commit
    while a commit log's bytes are buffered: those go at their own interval,
    so quiet queues make one log object per interval, not one more per
    dispatch (1,000 quiet queues: about 40,000 PUTs an hour instead of
    18,000). The held bytes ride that group commit's log object."""
    interval = 1.0
    held, quiet, sink = DerivedSegment(), MemorySegment(), ListSink()
    loop = asyncio.get_running_loop()
    async with make_pool(group_commit_interval=interval, chunk_wait=30.0) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(held, b"u" * 100)
        await asyncio.sleep(interval / 2)
        started = loop.time()
        await pool.append(quiet, b"v" * 100)
        await until(lambda: sink.puts != [], within=10 * interval)
        # At the held bytes' interval (half of one from now) nothing went: the
        # quiet bytes went at their own, and the held ones with them.
        assert loop.time() - started >= 0.9 * interval
        await until(lambda: len(sink.puts) == 2)
        assert quiet.data == b"v" * 100 and held.data == b"u" * 100
        assert pool.metrics.scheduled_by["flush"] == 0


async def test_held_consume_queue_bytes_wait_while_no_log_object_is_written() -> None:
    """With ``chunk_wait``, a derived segment's bytes wait out group commits
    that write nothing else (a busy commit log waiting for its chunk), and
    ride the next that writes a log object."""
    held, busy, quiet, sink = DerivedSegment(), MemorySegment(), MemorySegment(), ListSink()
    async with make_pool(group_commit_interval=0.05, chunk_wait=30.0,
                         direct_commit_size=4 * KiB) as pool:
        pool.send_small_commits_to(sink)
        await pool.append(held, b"u" * 100)
        for _ in range(10):  # 1 KiB every 10 ms: 4 KiB well within chunk_wait
            await pool.append(busy, b"w" * KiB)
            await asyncio.sleep(0.01)
        assert held.data == b"" and sink.puts == []
        assert pool.metrics.waited_for_chunk > 0
        await pool.append(quiet, b"v" * 100)
        await until(lambda: held.data == b"u" * 100)
        assert quiet.data == b"v" * 100
