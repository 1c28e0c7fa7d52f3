"""LoadRegistry with a fake load function: coalescing, limits, forget, close (no store)."""

from __future__ import annotations

import asyncio

import pytest

from tieredstore.errors import StoreClosed
from tieredstore.fetcher.loads import Load, Loaded, LoadRegistry
from tieredstore.fetcher.readahead import ReadAheadWindows
from tieredstore.fetcher.stats import FetcherMetrics, Source
from tieredstore.segment import FileType, SegmentPath
from tieredstore.segment.layout import ChunkRef, SegmentLayout
from tieredstore.tasks import Background, Priority, current_priority

UNIT = 100
A = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
B = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 10**6)


def unit(i: int) -> ChunkRef:
    return ChunkRef(i * UNIT, UNIT, f"chunk-{i}")


class FakeLoads:
    """A load function that waits for ``release`` and counts its runs."""

    def __init__(self, concurrency: int = 4) -> None:
        self.metrics = FetcherMetrics()
        self.release = asyncio.Event()
        self.runs: list[Load] = []
        self.fail: set[int] = set()
        self.active = 0
        self.most = 0
        self.registry = LoadRegistry(self.run, concurrency=concurrency, metrics=self.metrics)

    async def run(self, load: Load) -> Loaded:
        self.runs.append(load)
        return await self.registry.limited(load, lambda: self.get(load))

    async def get(self, load: Load) -> Loaded:
        self.active += 1
        self.most = max(self.most, self.active)
        try:
            await self.release.wait()
        finally:
            self.active -= 1
        if load.unit.position // UNIT in self.fail:
            raise OSError("boom")
        return load.unit.key.encode(), Source.STORE


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_concurrent_demands_of_one_unit_share_one_load() -> None:
    fake = FakeLoads()
    reads = [asyncio.ensure_future(fake.registry.demand(A, unit(3))) for _ in range(3)]
    await settle()
    assert len(fake.registry) == 1
    fake.release.set()
    assert await asyncio.gather(*reads) == [(b"chunk-3", Source.STORE)] * 3
    assert len(fake.runs) == 1 and fake.metrics.coalesced_waits == 2
    assert len(fake.registry) == 0


async def test_a_demand_joining_a_prefetch_is_a_read_ahead_hit() -> None:
    fake = FakeLoads()
    load = fake.registry.start(A, unit(1), prefetch=True)
    assert load.speculative and fake.registry.prefetch_bytes == UNIT
    read = asyncio.ensure_future(fake.registry.demand(A, unit(1)))
    await settle()
    assert not load.speculative
    fake.release.set()
    assert await read == (b"chunk-1", Source.STORE)
    assert fake.metrics.readahead_hits == 1 and fake.metrics.prefetch_units == 1
    assert fake.registry.prefetch_bytes == 0 and len(fake.runs) == 1


async def test_read_ahead_holds_at_most_half_the_get_permits() -> None:
    fake = FakeLoads(concurrency=4)
    for i in range(6):
        fake.registry.start(A, unit(i), prefetch=True)
    await settle()
    assert fake.most == 2
    reads = [asyncio.ensure_future(fake.registry.demand(B, unit(i))) for i in range(10, 12)]
    await settle()
    assert fake.most == 4, "demands take the permits read-ahead left"
    fake.release.set()
    await asyncio.gather(*reads)
    await fake.registry.background.wait_idle()
    assert fake.most == 4


async def test_forget_cancels_prefetches_and_keeps_demanded_loads_running() -> None:
    fake = FakeLoads()
    prefetch = fake.registry.start(A, unit(1), prefetch=True)
    read = asyncio.ensure_future(fake.registry.demand(A, unit(2)))
    other = fake.registry.start(B, unit(5), prefetch=True)
    await settle()
    fake.registry.forget(A)
    assert len(fake.registry) == 1 and not prefetch.keep and other.keep
    fake.release.set()
    assert await read == (b"chunk-2", Source.STORE)
    await fake.registry.background.wait_idle()
    assert prefetch.task is not None and prefetch.task.cancelled()
    assert fake.registry.prefetch_bytes == 0


async def test_a_failed_prefetch_is_counted_a_failed_demand_is_raised() -> None:
    fake = FakeLoads()
    fake.fail = {1, 2}
    fake.registry.start(A, unit(1), prefetch=True)
    read = asyncio.ensure_future(fake.registry.demand(A, unit(2)))
    fake.release.set()
    with pytest.raises(OSError, match="boom"):
        await read
    await fake.registry.background.wait_idle()
    assert fake.metrics.prefetch_errors == 1


async def test_close_cancels_loads_waits_for_background_work_and_refuses_demands() -> None:
    fake = FakeLoads()
    read = asyncio.ensure_future(fake.registry.demand(A, unit(1)))
    fake.registry.start(A, unit(2), prefetch=True)
    finished: list[str] = []

    async def write() -> None:
        await asyncio.sleep(0.01)
        finished.append("write")

    fake.registry.background.spawn(write(), "write")
    await settle()
    await fake.registry.close()
    assert finished == ["write"] and len(fake.registry) == 0
    with pytest.raises(StoreClosed):
        await read
    with pytest.raises(StoreClosed):
        await fake.registry.demand(A, unit(1))


# --- ReadAheadWindows ----------------------------------------------------------------------


def test_read_ahead_windows_keep_the_most_recent_segments() -> None:
    layout = SegmentLayout(unit(i) for i in range(10))
    evicted: list[str] = []
    windows: ReadAheadWindows[str] = ReadAheadWindows(2, 4, 2, on_evict=evicted.append)
    assert windows.advise("a", layout, 0, UNIT) == [unit(1), unit(2)]
    assert windows.advise("b", layout, 0, UNIT) == [unit(1), unit(2)]
    windows.advise("a", layout, UNIT, UNIT)  # "a" is now the most recent
    windows.advise("c", layout, 0, UNIT)
    assert evicted == ["b"] and "b" not in windows and len(windows) == 2
    assert windows.advise("a", layout, 2 * UNIT, UNIT) == [unit(3), unit(4), unit(5), unit(6)]
    windows.forget("a")
    assert windows.advise("a", layout, 5 * UNIT, UNIT) == [], "a new window: a jump"


async def test_a_read_joining_a_load_a_background_task_started_raises_it() -> None:
    # A merge (or compaction) reads a chunk through the fetcher: its load runs at
    # the merge's priority. A host read that joins it must not wait at that
    # priority behind the governor's queue: the load goes on at the reader's.
    seen: list[Priority] = []
    release = asyncio.Event()

    async def run(load: Load) -> Loaded:
        seen.append(current_priority())
        await release.wait()
        seen.append(current_priority())
        return b"x", Source.STORE

    registry = LoadRegistry(run, concurrency=4, metrics=FetcherMetrics())
    background = Background()

    async def merge_reads() -> Loaded:
        return await registry.demand(A, unit(2))

    merge = background.start(merge_reads(), "merge", priority=Priority.MERGE)
    await settle()
    assert seen == [Priority.MERGE]
    read = asyncio.ensure_future(registry.demand(A, unit(2)))  # the host's
    await settle()
    release.set()
    assert await read == (b"x", Source.STORE)
    await merge
    assert seen == [Priority.MERGE, Priority.HOST]
    await registry.close()
    await background.close()


async def test_read_ahead_a_background_read_starts_goes_no_higher_than_that_read() -> None:
    seen: list[Priority] = []

    async def run(load: Load) -> Loaded:
        seen.append(current_priority())
        return b"x", Source.STORE

    registry = LoadRegistry(run, concurrency=4, metrics=FetcherMetrics())

    async def merge_reads_ahead() -> None:
        registry.start(A, unit(5), prefetch=True)

    await Background().start(merge_reads_ahead(), "merge", priority=Priority.MERGE)
    await settle()
    assert seen == [Priority.MERGE]
    registry.start(A, unit(6), prefetch=True)  # the host's read-ahead
    await settle()
    assert seen == [Priority.MERGE, Priority.READ_AHEAD]
    await registry.close()
