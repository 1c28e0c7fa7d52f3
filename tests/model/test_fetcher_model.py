"""The Fetcher against DirectReader and the bytes written: a Hypothesis state machine.

A few segments on one MemoryObjectStore, each written by a ChunkedSegment
with small chunks (some writers commit through the fetcher, so their units
enter its memory tier as a tailing reader's would). Reads of random ranges,
sequential scans (read-ahead, drop-behind), concurrent reads (in-flight
loads shared), forgets, seals with merge (the layout changes under the
cache), and segments destroyed and written again with other bytes (at the
same keys, unless the disk tier is on: see tests/model/test_found.py) go to
a Fetcher with a memory budget of a few chunks (so it evicts all the time)
and, optionally, a disk tier. Every read must return exactly what a
DirectReader returns for the same layout, and what was written.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import tempfile
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tieredstore.errors import TieredStoreError
from tieredstore.fetcher import DiskTier, Fetcher
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import (
    ChunkedSegment,
    DirectReader,
    FileType,
    SegmentLayout,
    SegmentOptions,
    SegmentPath,
)

T = TypeVar("T")
SLOTS = 3
chunk_sizes = st.sampled_from([64, 100, 256, 512])
commit_sizes = st.lists(st.integers(1, 700), min_size=1, max_size=4)


def path_of(slot: int, generation: int = 0) -> SegmentPath:
    return SegmentPath("c", "b", "t", generation, FileType.COMMIT_LOG, slot * 1_000_000)


@dataclass
class Segment:
    path: SegmentPath
    writer: ChunkedSegment
    data: bytes
    tailing: bool  # the writer commits through the fetcher


class FetcherModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.bucket = MemoryObjectStore()
        self.direct = DirectReader(self.bucket)
        self.segments: dict[int, Segment] = {}
        self.generation = 0  # bumped to write a slot again at other keys
        self.seed = 0
        self.tmp: str | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    @initialize(budget_chunks=st.integers(1, 6), readahead=st.integers(0, 3),
                concurrency=st.integers(1, 4), drop_behind=st.booleans(), disk=st.booleans(),
                chunk_size=chunk_sizes, sizes=commit_sizes, tailing=st.booleans())
    def start(self, *, budget_chunks: int, readahead: int, concurrency: int, drop_behind: bool,
              disk: bool, chunk_size: int, sizes: list[int], tailing: bool) -> None:
        tier = None
        if disk:
            self.tmp = tempfile.mkdtemp(prefix="tieredstore-fetcher-model-")
            tier = DiskTier(self.tmp, 1 << 20)
        self.fetcher = Fetcher(self.bucket, memory_bytes=budget_chunks * 256, disk=tier,
                               readahead_chunk_num=readahead, readahead_chunk_max=readahead + 2,
                               read_concurrency=concurrency, drop_behind=drop_behind)
        self.run(self.write(0, chunk_size, 256, sizes, tailing))

    def teardown(self) -> None:
        try:
            if hasattr(self, "fetcher"):
                snap = self.fetcher.snapshot()
                for counter in ("memory_evictions", "readahead_hits", "coalesced_waits",
                                "dropped_behind", "disk_hits", "prefetch_errors"):
                    if snap.get(counter):
                        event(f"fetcher: {counter}")
                self.run(self.fetcher.close())
            self.run(self.bucket.close())
        finally:
            self.runner.close()
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def random_bytes(self, size: int) -> bytes:
        self.seed += 1
        return random.Random(self.seed).randbytes(size)

    # --- reading ------------------------------------------------------------------

    async def read_both(self, slot: int, position: int, length: int,
                        via_segment: bool = False) -> None:
        seg = self.segments[slot]
        layout = seg.writer.layout
        path = seg.path
        if via_segment and seg.tailing:
            got = await seg.writer.read0(position, length)
        else:
            got = await self.fetcher.read(path, layout, position, length)
        expected = seg.data[position : position + length]
        where = f"slot {slot} [{position}, {position + length}) of {len(seg.data)}"
        assert await self.direct.read(path, layout, position, length) == expected, where
        assert got == expected, f"{where}: the fetcher returned other bytes"

    def written(self) -> list[int]:
        return sorted(self.segments)

    def draw_range(self, data: st.DataObject, slot: int) -> tuple[int, int]:
        size = len(self.segments[slot].data)
        position = data.draw(st.integers(0, size - 1))
        length = data.draw(st.integers(1, min(size - position, 1500)))
        return position, length

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data(), via_segment=st.booleans())
    def read(self, data: st.DataObject, via_segment: bool) -> None:
        slot = data.draw(st.sampled_from(self.written()))
        position, length = self.draw_range(data, slot)
        self.run(self.read_both(slot, position, length, via_segment))

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data(), step=st.integers(20, 400), idle=st.booleans())
    def sequential_scan(self, data: st.DataObject, step: int, idle: bool) -> None:
        """A reader going forward from some position: read-ahead and drop-behind."""
        slot = data.draw(st.sampled_from(self.written()))
        size = len(self.segments[slot].data)
        start = data.draw(st.sampled_from([0, data.draw(st.integers(0, size - 1))]))

        async def go() -> None:
            for position in range(start, size, step):
                await self.read_both(slot, position, min(step, size - position))
                if idle:
                    await self.fetcher.wait_idle()

        self.run(go())

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data(), count=st.integers(2, 6))
    def concurrent_reads(self, data: st.DataObject, count: int) -> None:
        """Reads at once, of the same and of other units: loads are shared."""
        reads = []
        for _ in range(count):
            slot = data.draw(st.sampled_from(self.written()))
            reads.append((slot, *self.draw_range(data, slot)))

        async def go() -> None:
            await asyncio.gather(*(self.read_both(*r) for r in reads))

        self.run(go())

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data())
    def reader_from_a_listing(self, data: st.DataObject) -> None:
        """Another process's reader: the layout is listed, chunk CRCs come with the GET."""
        slot = data.draw(st.sampled_from(self.written()))
        position, length = self.draw_range(data, slot)
        seg = self.segments[slot]

        async def go() -> None:
            reader = await ChunkedSegment.open(self.bucket, seg.path, repair=False,
                                               reader=self.fetcher)
            assert reader.commit_position == len(seg.data)
            assert await reader.read0(position, length) == seg.data[position : position + length]

        self.run(go())

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data())
    def forget(self, data: st.DataObject) -> None:
        self.fetcher.forget(self.segments[data.draw(st.sampled_from(self.written()))].path)

    @rule()
    def wait_idle(self) -> None:
        self.run(self.fetcher.wait_idle())
        snap = self.fetcher.snapshot()
        assert snap["inflight_loads"] == 0, snap

    # --- writing ------------------------------------------------------------------

    async def write(self, slot: int, chunk_size: int, unit_target: int, sizes: list[int],
                    tailing: bool) -> None:
        options = SegmentOptions(chunk_size=chunk_size, unit_target=unit_target)
        path = path_of(slot, self.generation)
        writer = await ChunkedSegment.open(self.bucket, path, options=options,
                                           reader=self.fetcher if tailing else None)
        assert writer.commit_position == 0
        data = b""
        for size in sizes:
            piece = self.random_bytes(size)
            await writer.commit0(len(data), piece)
            data += piece
        self.segments[slot] = Segment(path, writer, data, tailing)

    @rule(slot=st.integers(0, SLOTS - 1), chunk_size=chunk_sizes,
          unit_target=st.sampled_from([100, 256, 1024]), sizes=commit_sizes,
          tailing=st.booleans())
    def create(self, slot: int, chunk_size: int, unit_target: int, sizes: list[int],
               tailing: bool) -> None:
        if slot not in self.segments:
            self.run(self.write(slot, chunk_size, unit_target, sizes, tailing))

    @precondition(lambda self: any(not s.writer.sealed for s in self.segments.values()))
    @rule(data=st.data(), sizes=commit_sizes)
    def commit_more(self, data: st.DataObject, sizes: list[int]) -> None:
        slot = data.draw(st.sampled_from([k for k, s in self.segments.items()
                                          if not s.writer.sealed]))
        seg = self.segments[slot]

        async def go() -> None:
            for size in sizes:
                piece = self.random_bytes(size)
                await seg.writer.commit0(len(seg.data), piece)
                seg.data += piece

        self.run(go())

    @precondition(lambda self: any(not s.writer.sealed for s in self.segments.values()))
    @rule(data=st.data())
    def seal_and_merge(self, data: st.DataObject) -> None:
        """The chunks become ranges of one merged object: new units, new keys."""
        slot = data.draw(st.sampled_from([k for k, s in self.segments.items()
                                          if not s.writer.sealed]))
        seg = self.segments[slot]
        self.run(seg.writer.seal(merge=True))
        assert seg.writer.merged and seg.writer.layout.size == len(seg.data)

    @precondition(lambda self: bool(self.segments))
    @rule(data=st.data(), same_shape=st.booleans(), chunk_size=chunk_sizes,
          sizes=commit_sizes, reads=st.integers(0, 4), tailing=st.booleans())
    def destroy_and_write_again(self, *, data: st.DataObject, same_shape: bool, chunk_size: int,
                                sizes: list[int], reads: int, tailing: bool) -> None:
        """Destroy a segment (the fetcher is told) and write other bytes at the same
        path, often of the same sizes, so that the unit keys are the same. Reads of
        the old layout may be under way meanwhile: each returns the old bytes or
        fails; none may leave old bytes to be served for the new segment."""
        slot = data.draw(st.sampled_from(self.written()))
        old = self.segments[slot]
        old_layout = old.writer.layout
        in_flight = [self.draw_range(data, slot) for _ in range(reads)]
        if same_shape and not old.writer.merged:
            chunk_size = old.writer.options.chunk_size
            sizes = [u.length for u in old_layout.units]

        async def read_old(position: int, length: int) -> None:
            try:
                got = await self.fetcher.read(old.path, old_layout, position, length)
            except TieredStoreError:
                return
            assert got == old.data[position : position + length], "a read of the old layout"

        async def go() -> None:
            tasks = [asyncio.ensure_future(read_old(*r)) for r in in_flight]
            try:
                await asyncio.sleep(0)
                await old.writer.destroy()
                if not old.tailing:
                    self.fetcher.forget(old.path)  # its writer did not read through it
                if self.fetcher.disk is not None:
                    # Not at the same keys: a disk write under way when a segment is
                    # forgotten still lands (tests/model/test_found.py), and a
                    # reader from a listing (no CRC to check it by) would get it.
                    self.generation += 1
                await self.write(slot, chunk_size, 1024, sizes, tailing)
            finally:
                await asyncio.gather(*tasks, return_exceptions=True)
            for task in tasks:
                task.result()  # the assertion of a read_old, if one failed

        self.run(go())

    # --- invariants ---------------------------------------------------------------

    @invariant()
    def memory_within_budget(self) -> None:
        if hasattr(self, "fetcher"):
            snap = self.fetcher.snapshot()
            assert snap["memory_bytes"] <= snap["memory_budget"], snap

    @invariant()
    def layouts_cover_the_data(self) -> None:
        for slot, seg in self.segments.items():
            layout: SegmentLayout = seg.writer.layout
            assert layout.size == len(seg.data), slot


FetcherModel.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestFetcherModel = pytest.mark.filterwarnings("error::ResourceWarning")(FetcherModel.TestCase)
