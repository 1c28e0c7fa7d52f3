"""forget() and the disk tier: nothing stored before a forget is served after it.

Disk work of a segment can outlast its forget(): the eviction runs in the
background, and the write of a unit loaded just before may land after that
eviction. Each test holds one of them at a gate, so the race is deterministic,
and reads the segment written again at the same keys through a layout whose
chunk CRC is unknown (the disk entry cannot be checked against it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tieredstore.fetcher import DiskTier, Fetcher, Lookup
from tieredstore.fetcher.generations import DiskGenerations
from tieredstore.fetcher.keys import disk_key, unit_key
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath

PATH = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
OPTIONS = SegmentOptions(chunk_size=64)
OLD, NEW = b"A" * 64, b"B" * 64


class GatedDisk(DiskTier):
    """A disk tier whose writes, deletes and evictions can be held at gates.

    A write asks ``still_wanted`` first (as the worker thread does), then waits
    at ``write_gate``, then stores regardless: the race ``still_wanted`` alone
    cannot close, a forget between the check and the store.
    """

    def __init__(self, directory: Path) -> None:
        super().__init__(directory, 1 << 20)
        self.write_gate = asyncio.Event()
        self.delete_gate = asyncio.Event()
        self.evict_gate = asyncio.Event()
        for gate in (self.write_gate, self.delete_gate, self.evict_gate):
            gate.set()
        self.checked = asyncio.Event()  # a write passed its still_wanted check
        self.landed = asyncio.Event()  # a write stored its entry
        self.evicted = asyncio.Event()  # an eviction is done

    async def put(self, key: str, data: bytes, crc: int, *, tag: str,
                  still_wanted: Callable[[], bool] = lambda: True) -> bool:
        if not still_wanted():
            return False
        self.checked.set()
        await self.write_gate.wait()
        stored = await super().put(key, data, crc, tag=tag)
        self.landed.set()
        return stored

    async def delete(self, key: str) -> bool:
        await self.delete_gate.wait()
        return await super().delete(key)

    async def evict(self, tag: str) -> int:
        await self.evict_gate.wait()
        try:
            return await super().evict(tag)
        finally:
            self.evicted.set()


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[tuple[MemoryObjectStore, Fetcher, GatedDisk]]:
    bucket = MemoryObjectStore()
    disk = GatedDisk(tmp_path / "cache")
    fetcher = Fetcher(bucket, memory_bytes=1024, disk=disk)
    yield bucket, fetcher, disk
    for gate in (disk.write_gate, disk.delete_gate, disk.evict_gate):
        gate.set()
    await fetcher.close()
    await bucket.close()


async def write_old_and_read_it(bucket: MemoryObjectStore, fetcher: Fetcher) -> ChunkedSegment:
    """The old segment, read once through the fetcher (its unit then goes to disk)."""
    writer = await ChunkedSegment.open(bucket, PATH, options=OPTIONS)
    await writer.commit0(0, OLD)
    assert await fetcher.read(PATH, writer.layout, 0, 64) == OLD
    return writer


async def written_again(bucket: MemoryObjectStore, fetcher: Fetcher) -> ChunkedSegment:
    """The segment written again at the same keys; a reader from a listing."""
    writer = await ChunkedSegment.open(bucket, PATH, options=OPTIONS)
    await writer.commit0(0, NEW)
    reader = await ChunkedSegment.open(bucket, PATH, repair=False, reader=fetcher)
    unit = reader.layout.units[0]
    assert unit.crc32c is None, "the disk entry must not be checkable against the layout"
    assert unit_key(unit) == unit_key(writer.layout.units[0]), "same keys"
    return reader


async def on_disk(disk: DiskTier) -> bytes | None:
    """The bytes the disk tier holds for the segment's unit, if any."""
    found, data, _ = await disk.get(disk_key((PATH.chunk_key(0), 0, 64)), 64)
    return data if found is Lookup.HIT else None


async def test_a_write_landing_after_the_forget_is_deleted_and_never_read(
    setup: tuple[MemoryObjectStore, Fetcher, GatedDisk],
) -> None:
    bucket, fetcher, disk = setup
    disk.write_gate.clear()
    disk.delete_gate.clear()
    old = await write_old_and_read_it(bucket, fetcher)
    await disk.checked.wait()  # its write was still wanted when checked
    await old.destroy()
    fetcher.forget(PATH)
    await disk.evicted.wait()  # the forget's eviction finds nothing yet
    disk.write_gate.set()
    await disk.landed.wait()  # ...then the old unit lands: its delete is held
    assert await on_disk(disk) == OLD
    reader = await written_again(bucket, fetcher)
    assert await reader.read0(0, 64) == NEW
    assert fetcher.snapshot()["disk_hits"] == 0, "read the disk while the old unit was on it"
    disk.delete_gate.set()
    await fetcher.wait_idle()
    assert await on_disk(disk) in (None, NEW)  # the new read's own write may stay
    assert len(fetcher.generations) == 0, "bookkeeping outlived the disk work"


async def test_no_disk_read_before_the_forgets_eviction_is_done(
    setup: tuple[MemoryObjectStore, Fetcher, GatedDisk],
) -> None:
    bucket, fetcher, disk = setup
    old = await write_old_and_read_it(bucket, fetcher)
    await fetcher.wait_idle()
    assert await on_disk(disk) == OLD
    await old.destroy()
    disk.evict_gate.clear()
    fetcher.forget(PATH)  # its eviction is held: the old unit is still on disk
    reader = await written_again(bucket, fetcher)
    assert await reader.read0(0, 64) == NEW
    assert fetcher.snapshot()["disk_hits"] == 0
    disk.evict_gate.set()
    await fetcher.wait_idle()
    assert await on_disk(disk) in (None, NEW)
    assert len(fetcher.generations) == 0


async def test_a_settled_segment_reads_the_disk_again(
    setup: tuple[MemoryObjectStore, Fetcher, GatedDisk],
) -> None:
    bucket, fetcher, _ = setup
    old = await write_old_and_read_it(bucket, fetcher)
    await fetcher.wait_idle()
    await old.destroy()
    fetcher.forget(PATH)
    await fetcher.wait_idle()
    reader = await written_again(bucket, fetcher)
    assert await reader.read0(0, 64) == NEW  # from the store; its write goes to disk
    await fetcher.wait_idle()
    fetcher.memory.clear()
    assert await reader.read0(0, 64) == NEW
    assert fetcher.snapshot()["disk_hits"] == 1


# --- DiskGenerations, pure ------------------------------------------------------------------


def test_generations_mark_writes_begun_before_a_forget_stale() -> None:
    gens: DiskGenerations[str] = DiskGenerations()
    before = gens.begin_write("p")
    gens.forget("p", evicting=True)
    after = gens.begin_write("p")
    assert gens.stale("p", before) and not gens.stale("p", after)
    assert not gens.settled("p")
    gens.end_eviction("p")
    assert not gens.settled("p"), "a stale write is still under way"
    gens.end_write("p", before)
    assert gens.settled("p"), "only current writes are left"
    gens.end_write("p", after)
    assert len(gens) == 0 and gens.current("p") == 0


def test_generations_keep_a_record_only_while_disk_work_is_under_way() -> None:
    gens: DiskGenerations[str] = DiskGenerations()
    gens.forget("idle", evicting=False)  # nothing under way: nothing to keep
    assert len(gens) == 0 and gens.settled("idle")
    gens.forget("p", evicting=True)
    gens.forget("p", evicting=True)
    assert len(gens) == 1 and not gens.settled("p")
    gens.end_eviction("p")
    assert not gens.settled("p")
    gens.end_eviction("p")
    assert len(gens) == 0 and gens.settled("p")
    generation = gens.begin_write("q")
    assert gens.settled("q"), "a current write does not unsettle its segment"
    gens.end_write("q", generation)
    assert len(gens) == 0
