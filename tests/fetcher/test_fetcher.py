"""The Fetcher under a real ChunkedSegment, counting the store's GETs."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tieredstore.errors import ConfigError, IntegrityError, StoreClosed
from tieredstore.fetcher import DiskTier, Fetcher, unit_key
from tieredstore.fetcher.fetcher import FetcherOptions
from tieredstore.objectstore import ByteRange, MemoryObjectStore, ObjectData, ObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.testing import ForwardingObjectStore

KiB = 1024
MiB = 1024 * KiB
CHUNK = 64 * KiB
OPTIONS = SegmentOptions(chunk_size=CHUNK)


def seg_path(base: int = 0) -> SegmentPath:
    return SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, base)


def gets(store: ObjectStore) -> int:
    return store.metrics.requests["get"]


async def write_segment(store: ObjectStore, chunks: int, *, base: int = 0, seed: int = 0
                        ) -> bytes:
    """Commit ``chunks`` full chunks through a cacheless writer (another process)."""
    data = random.Random(seed).randbytes(chunks * CHUNK)
    writer = await ChunkedSegment.open(store, seg_path(base), options=OPTIONS)
    await writer.commit0(0, data)
    return data


async def reader(store: ObjectStore, fetcher: Fetcher, base: int = 0) -> ChunkedSegment:
    return await ChunkedSegment.open(store, seg_path(base), options=OPTIONS, reader=fetcher)


@pytest.fixture
async def fetcher(fast_store: ObjectStore) -> AsyncIterator[Fetcher]:
    async with Fetcher(fast_store, memory_bytes=64 * MiB) as f:
        yield f


# --- sequential and random reads ---------------------------------------------------------


async def test_sequential_read_costs_one_get_per_unit(fast_store: ObjectStore,
                                                      fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 16)
    segment = await reader(fast_store, fetcher)
    before = gets(fast_store)
    step = 16 * KiB  # four reads per unit
    for position in range(0, len(data), step):
        assert await segment.read0(position, step) == data[position : position + step]
    await fetcher.wait_idle()
    snap = fetcher.snapshot()
    assert gets(fast_store) - before == 16, snap
    assert snap["store_gets"] == 16
    assert snap["readahead_hits"] == 15, "every unit after the first was read ahead"
    assert snap["prefetch_waste"] == 0 and snap["prefetch_errors"] == 0
    assert snap["bytes_from_memory"] + snap["bytes_from_store"] == len(data)


async def test_a_sequential_reader_drops_what_it_has_read_through(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    """Drop-behind: memory holds the read-ahead window, not the whole segment read."""
    data = await write_segment(fast_store, 16)
    segment = await reader(fast_store, fetcher)
    before = gets(fast_store)
    step = 16 * KiB
    for position in range(0, len(data), step):
        assert await segment.read0(position, step) == data[position : position + step]
        assert len(fetcher.memory) <= fetcher.options.readahead_chunk_max + 1
    await fetcher.wait_idle()
    assert gets(fast_store) - before == 16, "dropping behind must not cost GETs"
    assert fetcher.snapshot()["dropped_behind"] >= 14


async def test_random_readers_and_tailers_keep_their_units(fast_store: ObjectStore,
                                                           fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 8)
    segment = await reader(fast_store, fetcher)
    await segment.read0(5 * CHUNK, CHUNK)  # a jump: no window, nothing dropped
    await segment.read0(2 * CHUNK, CHUNK)
    assert fetcher.snapshot()["dropped_behind"] == 0
    before = gets(fast_store)
    assert await segment.read0(5 * CHUNK, CHUNK) == data[5 * CHUNK : 6 * CHUNK]
    assert gets(fast_store) == before
    # Units this process committed stay in memory even when read sequentially:
    # read through once (drop-behind would drop them), then again, without a GET.
    tail = await ChunkedSegment.open(fast_store, seg_path(1 << 30), options=OPTIONS,
                                     reader=fetcher)
    await tail.commit0(0, data[: 4 * CHUNK])
    for _ in range(2):
        for position in range(0, 4 * CHUNK, CHUNK):
            assert await tail.read0(position, CHUNK) == data[position : position + CHUNK]
    assert fetcher.snapshot()["dropped_behind"] == 0
    assert gets(fast_store) == before


async def test_drop_behind_can_be_turned_off(fast_store: ObjectStore) -> None:
    data = await write_segment(fast_store, 8)
    async with Fetcher(fast_store, memory_bytes=64 * MiB, drop_behind=False) as keeper:
        segment = await reader(fast_store, keeper)
        for position in range(0, len(data), CHUNK):
            await segment.read0(position, CHUNK)
        await keeper.wait_idle()
        assert len(keeper.memory) == 8 and keeper.snapshot()["dropped_behind"] == 0


async def test_read_ahead_makes_the_next_reads_hits(fast_store: ObjectStore,
                                                    fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 8)
    segment = await reader(fast_store, fetcher)
    before = gets(fast_store)
    await segment.read0(0, CHUNK)  # unit 0 on demand, units 1 and 2 read ahead
    await fetcher.wait_idle()
    assert gets(fast_store) - before == 3
    assert await segment.read0(CHUNK, CHUNK) == data[CHUNK : 2 * CHUNK]  # a hit
    await fetcher.wait_idle()
    # The window grew to 3 (units 2, 3, 4): only 3 and 4 were not held yet.
    assert gets(fast_store) - before == 5
    assert await segment.read0(2 * CHUNK, 2 * CHUNK) == data[2 * CHUNK : 4 * CHUNK]
    snap = fetcher.snapshot()
    assert snap["readahead_hits"] == 3 and snap["memory_hits"] == 3, snap


async def test_random_read_fetches_one_unit_on_a_miss_and_none_on_a_hit(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    data = await write_segment(fast_store, 16)
    segment = await reader(fast_store, fetcher)
    for index in (9, 3, 12):
        position = index * CHUNK + 1000
        before = gets(fast_store)
        assert await segment.read0(position, 4 * KiB) == data[position : position + 4 * KiB]
        await fetcher.wait_idle()
        assert gets(fast_store) - before == 1, f"miss in unit {index}"
        assert await segment.read0(position, 4 * KiB) == data[position : position + 4 * KiB]
        await fetcher.wait_idle()
        assert gets(fast_store) - before == 1, f"hit in unit {index}"
    assert fetcher.snapshot()["prefetch_units"] == 0


async def test_read_across_units_fetches_them_in_parallel(fast_store: ObjectStore,
                                                          fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 8)
    segment = await reader(fast_store, fetcher)
    before = gets(fast_store)
    position = 3 * CHUNK + 100
    assert await segment.read0(position, 3 * CHUNK) == data[position : position + 3 * CHUNK]
    assert gets(fast_store) - before == 4  # units 3, 4, 5, 6; a jump, so no read-ahead


async def test_concurrent_reads_of_one_unit_cause_one_get(fast_store: ObjectStore,
                                                          fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 8)
    segment = await reader(fast_store, fetcher)
    other = await reader(fast_store, fetcher)  # a second consumer of the same segment
    before = gets(fast_store)
    position = 5 * CHUNK + 10
    results = await asyncio.gather(
        segment.read0(position, 100), other.read0(position, 100), segment.read0(position, 50)
    )
    assert results == [data[position : position + 100]] * 2 + [data[position : position + 50]]
    await fetcher.wait_idle()
    assert gets(fast_store) - before == 1
    assert fetcher.snapshot()["coalesced_waits"] == 2


async def test_a_reader_giving_up_does_not_cancel_the_shared_load(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    data = await write_segment(fast_store, 4)
    segment = await reader(fast_store, fetcher)
    before = gets(fast_store)
    first = asyncio.ensure_future(segment.read0(3 * CHUNK, 10))
    await until_loading(fetcher)
    second = asyncio.ensure_future(segment.read0(3 * CHUNK + 20, 10))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == data[3 * CHUNK + 20 : 3 * CHUNK + 30]
    assert first.cancelled() and gets(fast_store) - before == 1


# --- tailing: committed data ---------------------------------------------------------------


async def test_data_committed_by_this_process_is_read_with_zero_gets(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    segment = await ChunkedSegment.open(fast_store, seg_path(), options=OPTIONS,
                                        reader=fetcher)
    before = gets(fast_store)
    rng = random.Random(1)
    written = b""
    for _ in range(40):  # a tailing reader right behind the writer
        batch = rng.randbytes(rng.randint(1, 3 * CHUNK))
        await segment.commit0(len(written), batch)
        assert await segment.read0(len(written), len(batch)) == batch
        written += batch
    assert await segment.read0(0, len(written)) == written
    await fetcher.wait_idle()
    assert gets(fast_store) - before == 0
    snap = fetcher.snapshot()
    assert snap["committed_bytes"] == len(written) and snap["bytes_from_store"] == 0


async def test_merge_reads_committed_chunks_from_memory_then_forgets_them(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    segment = await ChunkedSegment.open(fast_store, seg_path(), options=OPTIONS,
                                        reader=fetcher)
    data = random.Random(2).randbytes(6 * CHUNK)
    await segment.commit0(0, data)
    chunk_keys = {unit_key(u) for u in segment.layout.units}
    before = gets(fast_store)
    await segment.seal()  # 384 KiB: one part, re-uploaded from the chunks' bytes
    assert segment.merged and gets(fast_store) - before == 0
    assert not chunk_keys & set(fetcher.memory), "chunk entries outlived the merge"
    assert await segment.read0(CHUNK, 2 * CHUNK) == data[CHUNK : 3 * CHUNK]
    # The merged units were built from the chunks held: reading them is no GET.
    assert gets(fast_store) - before == 0
    assert fetcher.snapshot()["carried_units"] >= 1


# --- budgets ---------------------------------------------------------------------------------


async def test_memory_tier_never_exceeds_its_budget(fast_store: ObjectStore) -> None:
    data = await write_segment(fast_store, 32)
    budget = 5 * CHUNK + CHUNK // 2
    async with Fetcher(fast_store, memory_bytes=budget, readahead_chunk_num=2,
                       readahead_chunk_max=8) as fetcher:
        segment = await reader(fast_store, fetcher)
        rng = random.Random(3)
        position = 0
        for i in range(300):
            if i % 50 == 49:
                position = rng.randrange(len(data) - 1)  # jump now and then
            length = min(rng.randint(1, 40 * KiB), len(data) - position)
            assert await segment.read0(position, length) == data[position : position + length]
            assert fetcher.memory.nbytes <= budget
            # Prefetch never pushes out what was just read.
            assert unit_key(segment.layout.unit_at(position + length - 1)) in fetcher.memory
            position = (position + length) % len(data)
            if i % 7 == 0:
                await fetcher.wait_idle()
                assert fetcher.memory.nbytes <= budget
        snap = fetcher.snapshot()
        assert snap["prefetch_skipped"] > 0, "the window never met the budget"
        assert snap["memory_bytes"] <= budget


async def test_unit_larger_than_the_budget_is_served_not_cached(fast_store: ObjectStore
                                                                ) -> None:
    data = await write_segment(fast_store, 2)
    async with Fetcher(fast_store, memory_bytes=CHUNK - 1) as fetcher:
        segment = await reader(fast_store, fetcher)
        before = gets(fast_store)
        for _ in range(2):
            assert await segment.read0(CHUNK + 5, 10) == data[CHUNK + 5 : CHUNK + 15]
        assert gets(fast_store) - before == 2 and len(fetcher.memory) == 0


# --- disk tier -------------------------------------------------------------------------------


def disk_fetcher(store: ObjectStore, directory: Path) -> Fetcher:
    return Fetcher(store, memory_bytes=64 * MiB, disk=DiskTier(directory, 64 * MiB))


async def test_disk_tier_serves_a_new_fetcher_without_gets(fast_store: ObjectStore,
                                                           tmp_path: Path) -> None:
    data = await write_segment(fast_store, 8)
    async with disk_fetcher(fast_store, tmp_path / "cache") as first:
        segment = await reader(fast_store, first)
        assert await segment.read0(0, len(data)) == data
        await first.wait_idle()
        assert first.snapshot()["disk_writes"] == 8
    before = gets(fast_store)
    async with disk_fetcher(fast_store, tmp_path / "cache") as second:  # after a restart
        segment = await reader(fast_store, second)
        for position in range(0, len(data), 32 * KiB):
            assert await segment.read0(position, 32 * KiB) == data[position:position + 32 * KiB]
        await second.wait_idle()
        snap = second.snapshot()
    assert gets(fast_store) - before == 0
    assert snap["disk_hits"] == 8 and snap["bytes_from_store"] == 0


async def test_corrupt_disk_entry_is_refetched_not_returned(fast_store: ObjectStore,
                                                            tmp_path: Path) -> None:
    data = await write_segment(fast_store, 8)
    async with disk_fetcher(fast_store, tmp_path / "cache") as first:
        segment = await reader(fast_store, first)
        assert await segment.read0(0, len(data)) == data
        await first.wait_idle()
    files = sorted((tmp_path / "cache").rglob("*.val"))
    assert len(files) == 8, files  # 64 KiB entries live in files, not in SQLite
    raw = bytearray(files[3].read_bytes())
    raw[len(raw) // 2] ^= 0x01  # one bit flipped on disk
    files[3].write_bytes(bytes(raw))
    before = gets(fast_store)
    async with disk_fetcher(fast_store, tmp_path / "cache") as second:
        segment = await reader(fast_store, second)
        assert await segment.read0(0, len(data)) == data
        await second.wait_idle()
        snap = second.snapshot()
    assert gets(fast_store) - before == 1, "exactly the corrupt unit is fetched again"
    assert snap["disk_corrupt"] == 1 and snap["disk_hits"] == 7
    async with disk_fetcher(fast_store, tmp_path / "cache") as third:  # rewritten, good
        segment = await reader(fast_store, third)
        before = gets(fast_store)
        assert await segment.read0(0, len(data)) == data
        assert gets(fast_store) - before == 0


# --- integrity and errors --------------------------------------------------------------------


async def corrupt_object(store: ObjectStore, key: str) -> None:
    """Different bytes of the same length under the key, with the old metadata."""
    info = await store.head(key)
    body = bytearray(await store.get(key))
    body[100] ^= 0xFF
    await store.put(key, bytes(body), metadata=dict(info.metadata))


async def test_crc_mismatch_from_the_store_raises_and_is_not_cached(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    data = await write_segment(fast_store, 4)
    segment = await reader(fast_store, fetcher)
    await corrupt_object(fast_store, segment.layout.units[2].key)
    for _ in range(2):
        with pytest.raises(IntegrityError, match="CRC32C"):
            await segment.read0(2 * CHUNK + 5, 10)
    assert await segment.read0(CHUNK, 10) == data[CHUNK : CHUNK + 10]
    assert unit_key(segment.layout.units[2]) not in fetcher.memory


async def test_failed_prefetch_is_counted_not_raised_to_other_readers(
    fast_store: ObjectStore, fetcher: Fetcher
) -> None:
    data = await write_segment(fast_store, 6)
    segment = await reader(fast_store, fetcher)
    await corrupt_object(fast_store, segment.layout.units[2].key)
    assert await segment.read0(0, CHUNK) == data[:CHUNK]  # prefetches units 1 and 2
    await fetcher.wait_idle()
    assert fetcher.snapshot()["prefetch_errors"] == 1
    assert await segment.read0(CHUNK, 10) == data[CHUNK : CHUNK + 10]
    with pytest.raises(IntegrityError):
        await segment.read0(2 * CHUNK, 10)


class HeldGets(ForwardingObjectStore):
    """GETs of the keys in ``held`` wait until ``release`` is set."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.held: set[str] = set()
        self.release = asyncio.Event()

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        if key in self.held:
            await self.release.wait()
        return await super().get_object(key, byte_range)


async def test_reader_joining_a_failing_inflight_load_gets_its_error(
    fast_store: ObjectStore
) -> None:
    await write_segment(fast_store, 6)
    held = HeldGets(fast_store)
    fetcher = Fetcher(held, memory_bytes=64 * MiB)
    segment = await reader(held, fetcher)
    await corrupt_object(fast_store, segment.layout.units[1].key)
    held.held = {u.key for u in segment.layout.units[1:]}
    await segment.read0(0, CHUNK)  # read-ahead of unit 1 starts, not finished yet
    read = asyncio.ensure_future(segment.read0(CHUNK, 10))
    for _ in range(100):  # it joins that load
        if fetcher.snapshot()["coalesced_waits"]:
            break
        await asyncio.sleep(0)
    held.release.set()
    with pytest.raises(IntegrityError):
        await read
    snap = fetcher.snapshot()
    assert snap["coalesced_waits"] == 1 and snap["prefetch_errors"] == 0
    await fetcher.close()


async def until_loading(fetcher: Fetcher) -> None:
    for _ in range(100):
        if fetcher.snapshot()["inflight_loads"]:
            return
        await asyncio.sleep(0)
    raise AssertionError("no load started")


# --- forget and close -----------------------------------------------------------------------


async def test_forget_drops_the_segment_from_memory_only(fast_store: ObjectStore,
                                                         fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 4, base=0)
    other_data = await write_segment(fast_store, 4, base=10**6, seed=9)
    segment = await reader(fast_store, fetcher, 0)
    other = await reader(fast_store, fetcher, 10**6)
    await segment.read0(0, len(data))
    await other.read0(0, len(other_data))
    await fetcher.wait_idle()
    assert len(fetcher.memory) == 8
    fetcher.forget(seg_path(0))
    mine = {unit_key(u) for u in segment.layout.units}
    assert not mine & set(fetcher.memory)
    assert len(fetcher.memory) == 4
    before = gets(fast_store)
    assert await segment.read0(CHUNK + 1, 10) == data[CHUNK + 1 : CHUNK + 11]
    assert await other.read0(CHUNK + 1, 10) == other_data[CHUNK + 1 : CHUNK + 11]
    assert gets(fast_store) - before == 1, "only the forgotten segment goes back to the store"


async def test_forget_during_a_load_caches_nothing_of_the_segment(fast_store: ObjectStore,
                                                                  fetcher: Fetcher) -> None:
    data = await write_segment(fast_store, 6)
    segment = await reader(fast_store, fetcher)
    read = asyncio.ensure_future(segment.read0(2 * CHUNK, 10))
    await until_loading(fetcher)
    fetcher.forget(seg_path())
    assert await read == data[2 * CHUNK : 2 * CHUNK + 10]  # the waiting reader still gets it
    await fetcher.wait_idle()
    assert len(fetcher.memory) == 0


async def test_close_cancels_background_loads_and_refuses_reads(fast_store: ObjectStore
                                                                ) -> None:
    await write_segment(fast_store, 8)
    held = HeldGets(fast_store)
    fetcher = Fetcher(held, readahead_chunk_num=4)
    segment = await reader(held, fetcher)
    held.held = {u.key for u in segment.layout.units[1:]}
    await segment.read0(0, 10)  # starts four read-ahead loads
    assert fetcher.snapshot()["inflight_loads"] == 4
    await fetcher.close()
    assert fetcher.snapshot()["inflight_loads"] == 0 and len(fetcher.memory) == 0
    with pytest.raises(StoreClosed):
        await segment.read0(0, 10)
    await fetcher.close()  # idempotent


async def test_reader_waiting_when_the_fetcher_closes_gets_store_closed() -> None:
    store = MemoryObjectStore()
    await write_segment(store, 2)
    fetcher = Fetcher(store)
    segment = await reader(store, fetcher)
    read = asyncio.ensure_future(segment.read0(CHUNK, 10))
    await until_loading(fetcher)
    await fetcher.close()
    with pytest.raises(StoreClosed):
        await read


# --- construction ------------------------------------------------------------------------------


async def test_options_size_the_fetcher_and_keywords_change_them() -> None:
    store = MemoryObjectStore()
    options = FetcherOptions(memory_bytes=3 * MiB, readahead_chunk_num=1, readahead_chunk_max=4,
                             read_concurrency=2)
    async with Fetcher(store, options) as fetcher:
        assert fetcher.options == options and fetcher.memory.budget == 3 * MiB
        assert (fetcher.options.readahead_chunk_num, fetcher.options.readahead_chunk_max) == (1, 4)
        assert fetcher.disk is None
    async with Fetcher(store, options, drop_behind=False) as fetcher:
        assert fetcher.options.drop_behind is False and fetcher.options.memory_bytes == 3 * MiB
    async with Fetcher(store) as fetcher:
        assert fetcher.options == FetcherOptions()


def test_fetcher_options_check_their_fields_and_name_the_config_key() -> None:
    for bad, key in (({"read_concurrency": 0}, "read_concurrency"),
                     ({"readahead_chunk_num": 9, "readahead_chunk_max": 8}, "readahead_chunk_num"),
                     ({"readahead_chunk_num": -1}, "readahead_chunk_num"),
                     ({"memory_bytes": -1}, "memory_cache_bytes")):
        with pytest.raises(ConfigError) as info:
            FetcherOptions(**bad)
        assert info.value.key == key
