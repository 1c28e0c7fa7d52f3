"""What offloading and reading back cost, in requests (exact counts on memory).

The printed numbers are the measurements quoted in the issue's report.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.ledger.helpers import KiB, MiB, make_ledger, payloads
from tieredstore.fetcher import Fetcher
from tieredstore.ledger import LedgerEntry, LocalLedgerStore, OffloadOptions, SegmentLedgerOffloader
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import DirectReader

UUID = uuid.UUID("6d8f1c1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f")
CHUNK = 8 * MiB


@pytest.fixture
async def offloaded(tmp_path: Path) -> tuple[MemoryObjectStore, list[bytes], int]:
    """A 40 MiB ledger of 100 KiB entries, offloaded with 5 MiB blocks in 8 MiB chunks."""
    ledgers = LocalLedgerStore(tmp_path, fsync=False)
    entries = payloads([100 * KiB] * 410, seed=7)
    source = await make_ledger(ledgers, entries)
    store = MemoryObjectStore()
    off = SegmentLedgerOffloader(store, reader=DirectReader(store),
                                 options=OffloadOptions(block_size=5 * MiB, chunk_size=CHUNK))
    await off.offload(source, UUID, {})
    requests = dict(store.metrics.requests)
    data_len = source.length + 128 * 9 + 12 * len(entries)  # 9 blocks
    chunks = -(-data_len // CHUNK)
    print(f"\noffload of {data_len / MiB:.1f} MiB: {requests}")
    assert requests["put"] == chunks + 3  # the chunks, the seal entry and marker, the index
    assert requests["upload_part_copy"] == chunks - 1  # every whole chunk copied server-side
    assert requests["upload_part"] == 1  # the short last chunk and the unit table
    assert requests["create_multipart"] == requests["complete_multipart"] == 1
    store.metrics.reset()
    return store, entries, chunks


async def test_front_to_back_costs_one_get_per_unit(
    offloaded: tuple[MemoryObjectStore, list[bytes], int],
) -> None:
    store, entries, units = offloaded
    async with Fetcher(store) as fetcher:
        off = SegmentLedgerOffloader(store, reader=fetcher)
        handle = await off.read_offloaded(0, UUID)
        assert len(handle.segment.layout) == units == 6
        opened = dict(store.metrics.requests)
        assert opened == {"get": 2, "head": 1}  # the index, the unit table; the data's HEAD
        for i in range(len(entries)):
            assert await handle.read(i, i) == [LedgerEntry(i, entries[i])]
        await fetcher.wait_idle()
        gets = store.metrics.requests["get"] - opened["get"]
        print(f"entry by entry: {gets} GETs for {units} units, {len(entries)} entries, "
              f"{handle.windows_decoded} windows decoded")
        assert gets == units
        assert fetcher.metrics.store_gets == units
        assert set(store.metrics.requests) == {"get", "head"}


async def test_one_big_read_costs_one_get_per_unit(
    offloaded: tuple[MemoryObjectStore, list[bytes], int],
) -> None:
    store, entries, units = offloaded
    async with Fetcher(store) as fetcher:
        handle = await SegmentLedgerOffloader(store, reader=fetcher).read_offloaded(0, UUID)
        got = await handle.read(0, len(entries) - 1)
        assert [e.payload for e in got] == entries
        await fetcher.wait_idle()
        assert store.metrics.requests["get"] == 2 + units


async def test_without_the_fetcher_every_window_is_a_get(
    offloaded: tuple[MemoryObjectStore, list[bytes], int],
) -> None:
    """The contrast: with no cache each 1 MiB window re-fetches its 8 MiB unit."""
    store, entries, units = offloaded
    handle = await SegmentLedgerOffloader(store, reader=DirectReader(store)).read_offloaded(
        0, UUID)
    for i in range(len(entries)):
        await handle.read(i, i)
    gets = store.metrics.requests["get"] - 2
    print(f"no fetcher: {gets} GETs for {units} units")
    assert gets >= 4 * units


async def test_offset_cache_spares_rescans(
    offloaded: tuple[MemoryObjectStore, list[bytes], int],
) -> None:
    store, entries, _ = offloaded
    async with Fetcher(store) as fetcher:
        handle = await SegmentLedgerOffloader(store, reader=fetcher).read_offloaded(0, UUID)
        # Entry 45 is about 4 MiB into the first block: reaching it scans from
        # the block start, window by window, remembering every offset seen.
        assert await handle.read(45, 45) == [LedgerEntry(45, entries[45])]
        scanned = handle.windows_decoded
        assert scanned >= 4
        # An entry before it now starts at its own offset: one window.
        assert await handle.read(20, 20) == [LedgerEntry(20, entries[20])]
        assert handle.windows_decoded == scanned + 1
        assert handle.offsets.hits >= 1
        # Reading 45 again: decoded once more from its own offset, no GET.
        gets = store.metrics.requests["get"]
        assert await handle.read(45, 46) == [LedgerEntry(45, entries[45]),
                                             LedgerEntry(46, entries[46])]
        assert handle.windows_decoded == scanned + 2
        assert store.metrics.requests["get"] == gets
