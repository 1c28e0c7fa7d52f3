"""UploadBufferPool: one budget, full chunks, group commit, backpressure, failures."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pytest

from tieredstore.checksum import crc32c, format_crc
from tieredstore.errors import (
    CommitFailed,
    CommitPositionError,
    ConfigError,
    RequestTimeout,
    SegmentFenced,
    SegmentFull,
    SegmentSealed,
    ServerError,
    StoreClosed,
    Throttled,
    TransientError,
)
from tieredstore.objectstore import (
    Chokepoint,
    MemoryObjectStore,
    ObjectInfo,
    ObjectStore,
    RetryPolicy,
)
from tieredstore.objectstore.reads import CRC_METADATA_KEY
from tieredstore.segment import ChunkedSegment, FileSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.segment.pool import (
    AppendStatus,
    AppendTooLarge,
    CommitRetriesExhausted,
    PoolOptions,
    UploadBufferPool,
)
from tieredstore.segment.pool.pool import YIELD_BYTES
from tieredstore.testing import FaultKind, FaultSchedule, FaultyObjectStore

KiB = 1024
MiB = 1024 * KiB
CHUNK = 64 * KiB

T = TypeVar("T")


# --- helpers -------------------------------------------------------------------


def make_pool(**changes: Any) -> UploadBufferPool:
    """A pool for tests: no group commit unless asked."""
    values: dict[str, Any] = dict(
        budget_bytes=4 * MiB, chunk_size=CHUNK, group_commit_interval=60.0,
        upload_concurrency=8,
    )
    values.update(changes)
    return UploadBufferPool(PoolOptions(**values))


def seg_path(i: int) -> SegmentPath:
    return SegmentPath("c", "b", f"t{i}", 0, FileType.COMMIT_LOG, 0)


async def open_segments(store: ObjectStore, n: int, chunk: int = CHUNK) -> list[ChunkedSegment]:
    options = SegmentOptions(chunk_size=chunk)
    return [await ChunkedSegment.open(store, seg_path(i), options=options) for i in range(n)]


async def until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.001)


async def chunk_objects(store: ObjectStore, segment: ChunkedSegment) -> list[ObjectInfo]:
    return [o for o in await store.list_all(segment.path.base_dir) if "/chunk-" in o.key]


async def check_exactly_once(store: ObjectStore, segment: ChunkedSegment, expected: bytes) -> None:
    """The chunk objects tile [0, len(expected)) without gap or overlap, with our bytes."""
    position = 0
    for info in await chunk_objects(store, segment):
        assert info.key == segment.path.chunk_key(position), f"gap or overlap at {position}"
        data = await store.get(info.key)
        assert data == expected[position : position + len(data)], f"bytes differ at {position}"
        position += len(data)
    assert position == len(expected), f"{position} bytes landed, {len(expected)} appended"
    assert await segment.read0(0, len(expected)) == expected


def no_backoff(attempts: int) -> Chokepoint:
    return Chokepoint(RetryPolicy(max_attempts=attempts, base_delay=0.0, max_delay=0.0), seed=0)


class FlakyStore(MemoryObjectStore):
    """PUT attempts fail: the first ``fail_first``, then at ``rate``; at ``lose_rate`` an
    attempt lands but its answer is lost (raises anyway). The failures happen under
    the store's chokepoint, which retries each PUT up to ``attempts`` times, as a
    real backend's would be."""

    def __init__(self, *, fail_first: int = 0, rate: float = 0.0, lose_rate: float = 0.0,
                 seed: int = 0, attempts: int = 6) -> None:
        super().__init__(chokepoint=no_backoff(attempts))
        self.fail_first = fail_first
        self.rate = rate
        self.lose_rate = lose_rate
        self.rng = random.Random(seed)
        self.failed = 0
        self.lost = 0

    async def _execute(self, op: str, key: str, call: Callable[[], T]) -> T:
        if op != "put":
            return await super()._execute(op, key, call)
        if self.fail_first > 0:
            self.fail_first -= 1
            self.failed += 1
            raise ServerError("injected 500", op="put", key=key)
        roll = self.rng.random()
        if roll < self.rate:
            self.failed += 1
            raise ServerError("injected 500", op="put", key=key)
        done = await super()._execute(op, key, call)
        if roll < self.rate + self.lose_rate:
            self.lost += 1
            raise TransientError("injected: connection dropped after the PUT", op="put", key=key)
        return done


class GatedStore(MemoryObjectStore):
    """PUTs wait for ``gate``; ``waiting`` holds the keys of PUTs waiting now."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.waiting: list[str] = []

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        self.waiting.append(key)
        try:
            await self.gate.wait()
        finally:
            self.waiting.remove(key)
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


class SlowStore(MemoryObjectStore):
    """Each PUT takes a millisecond, so that uploads lag behind appends."""

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        await asyncio.sleep(0.001)
        return await super().put(key, data, if_none_match=if_none_match, metadata=metadata)


class BudgetSampler:
    """Samples, every loop turn, the bytes the pool holds for the segments (an oracle
    from ``buffered_range``, not the pool's own counter) and its counter."""

    def __init__(self, pool: UploadBufferPool, segments: list[ChunkedSegment]) -> None:
        self.pool = pool
        self.segments = segments
        self.max_buffered = 0
        self.max_counted = 0
        self.samples = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            buffered = 0
            for segment in self.segments:
                start, end = self.pool.buffered_range(segment)
                buffered += end - start
            self.max_buffered = max(self.max_buffered, buffered)
            self.max_counted = max(self.max_counted, self.pool.bytes_in_use)
            self.samples += 1
            await asyncio.sleep(0)

    def __enter__(self) -> BudgetSampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


class Concurrency:
    """How many commits run at once, now and at most."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0


class ScriptedSegment(FileSegment):
    """A FileSegment in memory whose commits follow a script of failures, take
    ``delay`` seconds, and are counted in ``across`` (all segments) and ``mine``."""

    def __init__(self, script: list[str], *, index: int = 999, delay: float = 0.0,
                 across: Concurrency | None = None) -> None:
        self.path = seg_path(index)
        self.data = bytearray()
        self.script = script
        self.commits: list[tuple[int, int]] = []
        self.delay = delay
        self.across = across or Concurrency()
        self.mine = Concurrency()

    @property
    def commit_position(self) -> int:
        return len(self.data)

    @property
    def sealed(self) -> bool:
        return False

    async def commit0(self, position: int, data: bytes | memoryview) -> None:
        self.commits.append((position, len(data)))
        for count in (self.across, self.mine):
            count.now += 1
            count.peak = max(count.peak, count.now)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.across.now -= 1
            self.mine.now -= 1
        if position != len(self.data):
            raise CommitPositionError("wrong position", segment="s", resume_position=len(self.data))
        action = self.script.pop(0) if self.script else "ok"
        if action == "half":  # a prefix lands
            self.data += bytes(data[: len(data) // 2])
            raise CommitFailed("injected", segment="s", resume_position=len(self.data))
        if action == "lost":  # all lands, the answer is lost
            self.data += bytes(data)
            raise TransientError("injected: answer lost")
        if action == "behind":  # the segment claims to be behind what the pool dropped
            raise CommitPositionError("injected", segment="s", resume_position=position - 10)
        self.data += bytes(data)

    async def read0(self, position: int, length: int) -> bytes:
        return bytes(self.data[position : position + length])

    async def seal(self) -> None:
        pass

    async def destroy(self) -> None:
        pass


def blob(rng: random.Random, lo: int, hi: int) -> bytes:
    return rng.randbytes(rng.randint(lo, hi))


# --- correctness ----------------------------------------------------------------


async def test_appends_to_many_segments_read_back_exactly_after_flush(
    fast_store: ObjectStore,
) -> None:
    segments = await open_segments(fast_store, 40)
    pool = make_pool(budget_bytes=1 * MiB)
    rng = random.Random(1)
    expected = [bytearray() for _ in segments]

    async def writer(i: int) -> None:
        for _ in range(60):
            data = blob(rng, 1, 5000)
            position = await pool.append(segments[i], data)
            assert position == len(expected[i])
            expected[i] += data

    await asyncio.gather(*(writer(i) for i in range(len(segments))))
    await pool.flush()
    for segment, want in zip(segments, expected, strict=True):
        assert segment.commit_position == len(want)
        await check_exactly_once(fast_store, segment, bytes(want))
    stats = pool.snapshot()
    assert pool.bytes_in_use == 0
    assert stats["bytes_committed"] == stats["bytes_appended"] == sum(map(len, expected))
    assert sum(stats["commit_latency"].values()) == stats["commits"] > 0
    await pool.close()


async def test_detach_after_flush_hands_back_nothing_and_the_segment_can_be_sealed() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"r" * 500)
    await pool.flush(segment)
    assert await pool.detach(segment) == b""
    assert pool.snapshot()["segments"] == 0
    await segment.seal()
    assert await segment.read0(0, 500) == b"r" * 500
    with pytest.raises(SegmentSealed):
        await pool.append(segment, b"more")
    await pool.close()


async def test_chunk_objects_are_full_size_except_the_tail() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    rng = random.Random(2)
    total = 5 * CHUNK + 1234
    expected = bytearray()
    while len(expected) < total:
        data = blob(rng, 1, min(3000, total - len(expected)))
        await pool.append(segment, data)
        expected += data
    # The five full chunks go without a flush; the tail waits for more bytes.
    await until(lambda: segment.commit_position == 5 * CHUNK)
    await asyncio.sleep(0.01)
    assert segment.commit_position == 5 * CHUNK
    puts_before = store.metrics.total_requests("put")
    await pool.flush()
    sizes = [o.size for o in await chunk_objects(store, segment)]
    assert sizes == [CHUNK] * 5 + [1234]
    assert puts_before == 5
    assert store.metrics.total_requests("put") == 6
    await check_exactly_once(store, segment, bytes(expected))
    assert pool.snapshot()["scheduled_by"]["chunk"] >= 1
    await pool.close()


async def test_one_big_append_is_committed_as_full_chunks() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    data = random.Random(3).randbytes(3 * CHUNK + 10)
    assert await pool.append(segment, data) == 0
    await pool.flush()
    assert [o.size for o in await chunk_objects(store, segment)] == [CHUNK] * 3 + [10]
    await check_exactly_once(store, segment, data)
    await pool.close()


async def test_group_commit_interval_flushes_a_small_buffer_without_flush() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool(group_commit_interval=0.05)
    started = time.monotonic()
    await pool.append(segment, b"m" * 100)
    await until(lambda: segment.commit_position == 100, within=2.0)
    assert time.monotonic() - started >= 0.04
    assert pool.snapshot()["scheduled_by"]["interval"] == 1
    assert await segment.read0(0, 100) == b"m" * 100
    await pool.close()


async def test_group_commit_interval_counts_from_the_oldest_byte_not_the_newest() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool(group_commit_interval=0.05)
    # Appends every 10 ms, for longer than several intervals: a timer reset by
    # every append would never fire.
    for _ in range(30):
        await pool.append(segment, b"x" * 10)
        await asyncio.sleep(0.01)
    assert segment.commit_position > 0
    assert pool.snapshot()["commits"] >= 2
    await pool.close()
    assert segment.commit_position == 300


async def test_read_returns_committed_and_buffered_bytes_alike() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    data = random.Random(4).randbytes(150)
    await pool.append(segment, data[:100])
    await pool.flush(segment)
    assert await pool.append(segment, data[100:]) == 100
    assert pool.append_position(segment) == 150
    assert pool.buffered_range(segment) == (100, 150)
    assert await pool.read(segment, 110, 30) == data[110:140]
    assert await pool.read(segment, 50, 100) == data[50:150]
    await pool.close()


async def test_commits_run_one_at_a_time_per_segment_and_concurrently_across() -> None:
    across = Concurrency()
    segments = [ScriptedSegment([], index=i, delay=0.002, across=across) for i in range(10)]
    pool = make_pool(chunk_size=1 * KiB, upload_concurrency=4)
    rng = random.Random(10)
    expected = [bytearray() for _ in segments]
    for _ in range(100):
        i = rng.randrange(len(segments))
        data = blob(rng, 1, 3000)
        await pool.append(segments[i], data)
        expected[i] += data
    await pool.flush()
    assert 2 <= across.peak <= 4
    for segment, want in zip(segments, expected, strict=True):
        assert segment.mine.peak == 1
        assert bytes(segment.data) == bytes(want)
        positions = [p for p, _ in segment.commits]
        assert positions == sorted(positions)
        assert all(n <= 1 * KiB for _, n in segment.commits)
    await pool.close()


async def test_a_zero_interval_commits_every_append_without_flush() -> None:
    [segment] = await open_segments(MemoryObjectStore(), 1)
    pool = make_pool(group_commit_interval=0.0)
    await pool.append(segment, b"now")
    await until(lambda: segment.commit_position == 3)
    await pool.close()


# --- budget and backpressure ------------------------------------------------


async def test_pool_bytes_never_exceed_the_budget_in_a_write_storm() -> None:
    store = SlowStore()
    segments = await open_segments(store, 200)
    budget = 256 * KiB
    pool = make_pool(budget_bytes=budget, upload_concurrency=16)
    rng = random.Random(5)
    expected = [bytearray() for _ in segments]

    async def writer(i: int) -> None:
        for _ in range(20):
            data = blob(rng, 100, 3000)
            await pool.append(segments[i], data)
            expected[i] += data

    with BudgetSampler(pool, segments) as sampler:
        await asyncio.gather(*(writer(i) for i in range(len(segments))))
        await pool.flush()
    stats = pool.snapshot()
    total = sum(map(len, expected))
    assert total > 10 * budget
    assert sampler.samples > 100
    assert 0 < sampler.max_buffered <= budget
    assert sampler.max_counted <= budget
    assert stats["peak_bytes_in_use"] <= budget
    assert stats["waits"] > 0 and stats["wait_seconds"] > 0
    assert stats["scheduled_by"]["room"] > 0
    for segment, want in zip(segments, expected, strict=True):
        assert await segment.read0(0, segment.commit_position) == bytes(want)
    await pool.close()


async def test_a_thousand_open_segments_share_a_one_mib_budget() -> None:
    store = MemoryObjectStore()
    segments = await open_segments(store, 1000)
    budget = 1 * MiB
    pool = make_pool(budget_bytes=budget)
    rng = random.Random(6)
    messages = [blob(rng, 256, 768) for _ in range(64)]

    async def writer(i: int) -> None:
        for k in range(8):
            await pool.append(segments[i], messages[(i + 7 * k) % 64])

    with BudgetSampler(pool, segments) as sampler:
        await asyncio.gather(*(writer(i) for i in range(len(segments))))
        appended = pool.snapshot()["bytes_appended"]
        await pool.flush()
    assert appended > 3 * budget
    assert sampler.max_buffered <= budget
    assert pool.snapshot()["peak_bytes_in_use"] <= budget
    assert sum(s.commit_position for s in segments) == appended
    await pool.close()


async def test_backpressure_waiting_append_completes_once_uploads_land() -> None:
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    budget = 8 * KiB
    pool = make_pool(budget_bytes=budget)
    assert await pool.append(segment, b"a" * budget) == 0
    await until(lambda: len(store.waiting) == 1)  # room-making started its upload

    result = pool.try_append(segment, b"b" * 10)
    assert result.status is AppendStatus.BUFFER_FULL and not result.ok
    assert result.position is None
    assert pool.append_position(segment) == budget
    assert pool.bytes_in_use == budget

    waiting = asyncio.create_task(pool.append(segment, b"c" * 100))
    await asyncio.sleep(0.02)
    assert not waiting.done()
    # First come, first served: no small append jumps the queue.
    assert pool.try_append(segment, b"d").status is AppendStatus.BUFFER_FULL
    store.gate.set()
    assert await asyncio.wait_for(waiting, 2.0) == budget
    await pool.flush()
    assert await segment.read0(0, budget + 100) == b"a" * budget + b"c" * 100
    stats = pool.snapshot()
    assert stats["buffer_full"] == 2
    assert stats["waits"] == 1 and stats["wait_seconds"] >= 0.02
    assert stats["peak_bytes_in_use"] == budget
    await pool.close()


async def test_a_cancelled_waiting_append_leaves_no_bytes_behind() -> None:
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool(budget_bytes=4 * KiB)
    await pool.append(segment, b"a" * 4 * KiB)
    waiting = asyncio.create_task(pool.append(segment, b"b" * 100))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    store.gate.set()
    await pool.flush()
    assert pool.bytes_in_use == 0
    assert await pool.append(segment, b"c") == 4 * KiB
    await pool.close()
    assert segment.commit_position == 4 * KiB + 1


async def test_an_append_larger_than_the_budget_is_refused() -> None:
    [segment] = await open_segments(MemoryObjectStore(), 1)
    pool = make_pool(budget_bytes=1 * KiB)
    with pytest.raises(AppendTooLarge, match="larger than the whole upload buffer pool"):
        await pool.append(segment, b"x" * 1025)
    with pytest.raises(AppendTooLarge):
        pool.try_append(segment, b"x" * 1025)
    assert await pool.append(segment, b"x" * 1024) == 0
    await pool.close()
    assert segment.commit_position == 1024


async def test_room_is_made_by_flushing_the_largest_buffer_first() -> None:
    store = GatedStore()
    a, b, c, d = await open_segments(store, 4)
    pool = make_pool(budget_bytes=10_000)
    await pool.append(a, b"a" * 5000)
    await pool.append(b, b"b" * 1000)
    await pool.append(c, b"c" * 1000)
    await asyncio.sleep(0.01)
    assert store.waiting == []  # 7,000 bytes: under the high-water mark
    await pool.append(d, b"d" * 1000)  # 8,000 > 7,500: make room, down to 5,000 not due
    await until(lambda: len(store.waiting) == 1)
    await asyncio.sleep(0.01)
    assert store.waiting == [a.path.chunk_key(0)]
    assert pool.snapshot()["scheduled_by"]["room"] == 1
    store.gate.set()
    await pool.close()


# --- failures -----------------------------------------------------------------


async def test_failed_puts_are_retried_by_the_chokepoint_alone_and_land_exactly_once() -> None:
    store = FlakyStore(fail_first=5)
    segments = await open_segments(store, 3)
    pool = make_pool()
    rng = random.Random(7)
    expected = [bytearray() for _ in segments]
    for _ in range(50):
        i = rng.randrange(3)
        data = blob(rng, 1, 9000)
        await pool.append(segments[i], data)
        expected[i] += data
    await pool.flush()
    assert store.failed == 5
    assert store.metrics.retries["put"] == 5  # the chokepoint's
    stats = pool.snapshot()
    assert stats["retries"] == 0 and stats["commit_errors"] == {}  # none on top
    for segment, want in zip(segments, expected, strict=True):
        await check_exactly_once(store, segment, bytes(want))
    await pool.close()


async def test_random_failures_and_lost_answers_still_land_exactly_once() -> None:
    store = FlakyStore(rate=0.3, lose_rate=0.1, seed=42, attempts=60)
    segments = await open_segments(store, 20)
    pool = make_pool(budget_bytes=512 * KiB, group_commit_interval=0.005)
    rng = random.Random(8)
    expected = [bytearray() for _ in segments]

    async def writer(i: int) -> None:
        for _ in range(40):
            data = blob(rng, 1, 6000)
            assert await pool.append(segments[i], data) == len(expected[i])
            expected[i] += data
            if rng.random() < 0.2:
                await asyncio.sleep(0.002)

    await asyncio.gather(*(writer(i) for i in range(len(segments))))
    await pool.flush()
    assert store.failed > 20 and store.lost > 5
    for segment, want in zip(segments, expected, strict=True):
        assert not segment.fenced
        await check_exactly_once(store, segment, bytes(want))
    await pool.close()


async def test_a_partly_landed_commit_drops_its_prefix_and_the_next_flush_sends_the_rest(
) -> None:
    segment = ScriptedSegment(["half", "lost"])
    pool = make_pool()
    data = random.Random(9).randbytes(1000)
    await pool.append(segment, data)
    with pytest.raises(CommitRetriesExhausted) as info:  # half landed
        await pool.flush(segment)
    assert isinstance(info.value.__cause__, CommitFailed)
    assert pool.buffered_range(segment) == (500, 1000) and pool.bytes_in_use == 500
    with pytest.raises(CommitRetriesExhausted) as info:  # the rest landed, answer lost
        await pool.flush(segment)
    assert isinstance(info.value.__cause__, TransientError) and info.value.attempts == 2
    await pool.flush(segment)  # the same bytes again: the segment is past them
    assert bytes(segment.data) == data
    assert segment.commits == [(0, 1000), (500, 500), (500, 500)]
    assert pool.bytes_in_use == 0
    await pool.close()


async def test_a_commit_position_behind_the_buffer_stops_the_segment() -> None:
    segment = ScriptedSegment(["ok", "behind"])
    pool = make_pool()
    await pool.append(segment, b"a" * 100)
    await pool.flush(segment)
    await pool.append(segment, b"b" * 50)
    with pytest.raises(CommitPositionError) as info:
        await pool.flush(segment)
    assert "disagree" in "".join(getattr(info.value, "__notes__", []))
    with pytest.raises(CommitPositionError):
        await pool.append(segment, b"c")
    assert pool.buffered_range(segment) == (100, 150)
    assert await pool.read(segment, 100, 50) == b"b" * 50
    assert await pool.detach(segment) == b"b" * 50
    assert pool.bytes_in_use == 0
    await pool.close()


async def test_a_fenced_segment_surfaces_on_flush_and_others_keep_working() -> None:
    store = MemoryObjectStore()
    fenced, other, third = await open_segments(store, 3)
    theirs = b"another writer's chunk"
    await store.put(fenced.path.chunk_key(0), theirs, if_none_match=True,
                    metadata={CRC_METADATA_KEY: format_crc(crc32c(theirs))})
    pool = make_pool()
    await pool.append(fenced, b"x" * 100)
    await pool.append(other, b"y" * 100)
    with pytest.raises(SegmentFenced):
        await pool.flush(fenced)
    await pool.flush(other)
    assert await other.read0(0, 100) == b"y" * 100
    with pytest.raises(SegmentFenced):
        await pool.append(fenced, b"z")
    assert pool.buffered_range(fenced) == (0, 100)  # kept, never dropped
    assert await pool.read(fenced, 0, 100) == b"x" * 100
    await pool.append(third, b"w" * 10)
    with pytest.raises(SegmentFenced):
        await pool.flush()
    assert third.commit_position == 10
    stats = pool.snapshot()
    assert stats["failed_segments"] == 1 and stats["bytes_errored"] == 100
    assert stats["segment_errors"] == {"SegmentFenced": 1}
    assert await pool.detach(fenced) == b"x" * 100
    assert pool.bytes_in_use == 0
    await pool.close()


async def test_a_commit_failing_after_the_chokepoints_retries_surfaces_and_stays_buffered(
) -> None:
    store = FlakyStore(fail_first=10**9, attempts=3)
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"q" * 300)
    with pytest.raises(CommitRetriesExhausted) as info:
        await pool.flush(segment)
    assert isinstance(info.value.__cause__, CommitFailed)
    assert info.value.attempts == 1 and info.value.buffered == 300
    assert store.failed == 3  # the chokepoint's attempts, and no more
    assert pool.buffered_range(segment) == (0, 300)
    assert await pool.read(segment, 0, 300) == b"q" * 300
    with pytest.raises(CommitRetriesExhausted) as info:  # each flush: one more commit
        await pool.flush(segment)
    assert info.value.attempts == 2 and store.failed == 6
    store.fail_first = 0  # the store heals; the next flush commits the bytes
    await pool.flush(segment)
    await check_exactly_once(store, segment, b"q" * 300)
    assert pool.snapshot()["retries"] == 2
    await pool.close()


async def test_one_throttled_chunk_costs_at_most_the_chokepoints_attempts() -> None:
    """Under throttling that never lets up, a flush reports failure after
    ``retry_max_attempts`` PUTs of the chunk (the chokepoint's), not that many
    squared (the pool used to retry on top with the same keys: 6 x 6 = 36)."""
    inner = MemoryObjectStore(chokepoint=no_backoff(1))
    attempts = RetryPolicy().max_attempts  # the default of retry_max_attempts
    store = FaultyObjectStore(
        inner, FaultSchedule(seed=3, rate=1.0, kinds=frozenset({FaultKind.SLOW_DOWN}),
                             ops=frozenset({"put"})),
        chokepoint=no_backoff(attempts))
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"t" * 1000)
    with pytest.raises(CommitRetriesExhausted) as info:
        await pool.flush(segment)
    assert isinstance(info.value.__cause__, CommitFailed)
    assert isinstance(info.value.__cause__.__cause__, Throttled)
    puts = store.injected[("put", FaultKind.SLOW_DOWN)]
    assert puts == attempts == 6
    assert inner.metrics.total_requests("put") == 0  # nothing reached the bucket
    store.enabled = False  # the throttling stops: the next flush lands the bytes
    await pool.flush(segment)
    await check_exactly_once(store, segment, b"t" * 1000)
    await pool.close()


async def test_a_failed_commit_is_sent_again_with_the_same_bytes() -> None:
    """Its answer lost on the last attempt, a chunk may have landed: the next flush
    sends the very same bytes (and finds them there), not a fuller chunk, even
    with more bytes appended meanwhile; a different chunk at its key would look
    like another writer's and fence the segment."""
    inner = MemoryObjectStore(chokepoint=no_backoff(1))
    store = FaultyObjectStore(
        inner, FaultSchedule(seed=5, rate=1.0, kinds=frozenset({FaultKind.REPLY_LOST}),
                             ops=frozenset({"put"}), max_faults=1),
        chokepoint=no_backoff(1))
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    first = random.Random(1).randbytes(1000)
    await pool.append(segment, first)
    with pytest.raises(CommitRetriesExhausted) as info:
        await pool.flush(segment)
    assert isinstance(info.value.__cause__, CommitFailed)
    assert isinstance(info.value.__cause__.__cause__, RequestTimeout)
    assert len(await chunk_objects(store, segment)) == 1  # it landed all the same
    more = random.Random(2).randbytes(2000)
    await pool.append(segment, more)
    await pool.flush(segment)
    assert not segment.fenced
    assert [o.size for o in await chunk_objects(store, segment)] == [1000, 2000]
    await check_exactly_once(store, segment, first + more)
    await pool.close()


async def test_a_segment_sealed_behind_the_pools_back_keeps_its_bytes() -> None:
    store = MemoryObjectStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"s" * 10)
    await pool.flush(segment)
    await pool.append(segment, b"t" * 10)
    await segment.seal()
    with pytest.raises(SegmentSealed):
        await pool.flush(segment)
    assert await pool.detach(segment) == b"t" * 10
    with pytest.raises(SegmentSealed):
        await pool.append(segment, b"u")
    await pool.close()


async def test_a_full_segment_stops_and_keeps_the_bytes_that_do_not_fit() -> None:
    store = MemoryObjectStore()
    segment = await ChunkedSegment.open(store, seg_path(0),
                                        options=SegmentOptions(chunk_size=CHUNK, max_size=100))
    pool = make_pool()
    await pool.append(segment, b"f" * 150)
    with pytest.raises(SegmentFull):
        await pool.flush(segment)
    with pytest.raises(SegmentFull):
        await pool.append(segment, b"g")
    assert pool.buffered_range(segment) == (0, 150)
    assert await pool.read(segment, 0, 150) == b"f" * 150
    assert await pool.detach(segment) == b"f" * 150
    await pool.close()


# --- closing ------------------------------------------------------------------


async def test_close_waits_for_commits_in_flight() -> None:
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"k" * CHUNK)  # a full chunk: its upload starts now
    await pool.append(segment, b"l" * 10)
    await until(lambda: len(store.waiting) == 1)
    closing = asyncio.create_task(pool.close())
    await asyncio.sleep(0.02)
    assert not closing.done()
    assert pool.snapshot()["commits_in_flight"] == 1
    with pytest.raises(StoreClosed):
        await pool.append(segment, b"m")
    with pytest.raises(StoreClosed):
        pool.try_append(segment, b"m")
    store.gate.set()
    await asyncio.wait_for(closing, 2.0)
    assert segment.commit_position == CHUNK + 10
    assert pool.snapshot()["commits_in_flight"] == 0
    await pool.close()  # idempotent


async def test_wait_idle_waits_for_due_commits_and_leaves_the_tail_buffered() -> None:
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool()
    await pool.append(segment, b"k" * CHUNK + b"l" * 10)  # a full chunk is due, the tail not
    await until(lambda: len(store.waiting) == 1)
    idle = asyncio.create_task(pool.wait_idle())
    await asyncio.sleep(0.02)
    assert not idle.done(), "wait_idle returned with a commit in flight"
    store.gate.set()
    await asyncio.wait_for(idle, 2.0)
    assert segment.commit_position == CHUNK
    assert pool.snapshot()["commits_in_flight"] == 0
    assert pool.buffered_range(segment) == (CHUNK, CHUNK + 10)
    await pool.close()


async def test_close_fails_appends_waiting_for_room() -> None:
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool(budget_bytes=1 * KiB)
    await pool.append(segment, b"a" * KiB)
    waiting = asyncio.create_task(pool.append(segment, b"b"))
    await asyncio.sleep(0.01)
    closing = asyncio.create_task(pool.close())
    with pytest.raises(StoreClosed):
        await waiting
    store.gate.set()
    await closing
    assert segment.commit_position == KiB


# --- options ------------------------------------------------------------------


def test_pool_options_check_their_fields_and_name_the_config_key() -> None:
    for bad, key in (({"budget_bytes": 0}, "pool_bytes"), ({"chunk_size": 0}, "chunk_size"),
                     ({"group_commit_interval": -1.0}, "group_commit_interval"),
                     ({"upload_concurrency": 0}, "upload_concurrency"),
                     ({"high_water": 0.4}, "high_water")):
        with pytest.raises(ConfigError) as info:
            PoolOptions(**bad)
        assert info.value.key == key


async def test_appends_pause_for_commits_in_worker_threads_once_per_yield() -> None:
    """With ``thread_handoff``, a producer that never waits sleeps that long each
    YIELD_BYTES while a commit is in flight (its thread can take the GIL)."""
    store = GatedStore()
    [segment] = await open_segments(store, 1)
    pool = make_pool(budget_bytes=64 * MiB, thread_handoff=0.01)
    await pool.append(segment, b"a" * CHUNK)
    await until(lambda: len(store.waiting) == 1)  # a commit in flight, held
    started = time.perf_counter()
    for _ in range(4 * YIELD_BYTES // (64 * KiB)):
        assert pool.append_nowait(segment, b"b" * 64 * KiB).ok
        pool.yield_due()
    assert time.perf_counter() - started >= 4 * 0.01
    store.gate.set()
    await pool.flush()
    with pytest.raises(ValueError, match="thread_handoff"):
        PoolOptions(thread_handoff=1.0)
    await pool.close()
