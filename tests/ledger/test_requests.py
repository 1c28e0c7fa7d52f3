"""What offloading and reading back cost, in requests (exact counts on memory).

The printed numbers are the measurements quoted in the issue's report.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.ledger.helpers import KiB, MiB, make_ledger, payloads
from tieredstore.ledger import (
    LedgerEntry,
    LocalLedgerStore,
    OffloadedReadHandle,
    OffloadOptions,
    SegmentLedgerOffloader,
)
from tieredstore.objectstore import ByteRange, MemoryObjectStore, ObjectData

UUID = uuid.UUID("6d8f1c1e-2a3b-4c5d-8e9f-0a1b2c3d4e5f")
ENTRIES = payloads([100 * KiB] * 410, seed=7)  # 40 MiB


class RangeLog(MemoryObjectStore):
    """Remembers the byte range of every GET (None: the whole object)."""

    def __init__(self) -> None:
        super().__init__()
        self.gets: list[tuple[str, ByteRange | None]] = []

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.gets.append((key, byte_range))
        return await super().get_object(key, byte_range)


@pytest.fixture
async def offloaded(tmp_path: Path) -> RangeLog:
    """A 40 MiB ledger of 100 KiB entries, offloaded in parts of 8 MiB."""
    ledgers = LocalLedgerStore(tmp_path, fsync=False)
    source = await make_ledger(ledgers, ENTRIES)
    store = RangeLog()
    off = SegmentLedgerOffloader(store, options=OffloadOptions(block_size=8 * MiB))
    await off.offload(source, UUID, {})
    requests = dict(store.metrics.requests)
    print(f"\noffload of {source.length / MiB:.1f} MiB: {requests}")
    assert requests["upload_part"] == 5  # 40 MiB and the block headers, parts of >= 8 MiB
    assert requests["create_multipart"] == requests["complete_multipart"] == 1
    assert requests["put"] == 1  # the index
    assert "upload_part_copy" not in requests
    store.metrics.reset()
    store.gets.clear()
    return store


async def test_one_entry_costs_one_ranged_get_of_at_most_1_mib(offloaded: RangeLog) -> None:
    store = offloaded
    handle = await SegmentLedgerOffloader(store).read_offloaded(0, UUID)
    assert isinstance(handle, OffloadedReadHandle)
    assert dict(store.metrics.requests) == {"get": 1}  # the index, once
    index_key = handle.location.index_key
    data_key = handle.location.data_key
    assert store.gets == [(index_key, None)]
    for i in (0, 205, 409, 37):  # the first, the middle, the last, and back
        store.gets.clear()
        before = dict(store.metrics.requests)
        assert await handle.read(i, i) == [LedgerEntry(i, ENTRIES[i])]
        ((key, ranged),) = store.gets
        assert key == data_key and ranged is not None and ranged.length <= MiB
        assert store.metrics.requests["get"] == before["get"] + 1
        print(f"entry {i}: one GET of bytes [{ranged.start}, {ranged.end})")
    assert set(store.metrics.requests) == {"get"}


async def test_entry_by_entry_fetches_each_block_once(offloaded: RangeLog) -> None:
    store = offloaded
    handle = await SegmentLedgerOffloader(store).read_offloaded(0, UUID)
    assert isinstance(handle, OffloadedReadHandle)
    for i in range(len(ENTRIES)):
        assert await handle.read(i, i) == [LedgerEntry(i, ENTRIES[i])]
    blocks = len(handle.index.entries)
    print(f"entry by entry: {handle.gets} GETs, {blocks} blocks of <= 1 MiB, "
          f"{len(ENTRIES)} entries")
    assert handle.gets == blocks == -(-len(ENTRIES) // 10)  # ten 100 KiB entries a block


async def test_one_big_read_fetches_up_to_8_mib_a_get(offloaded: RangeLog) -> None:
    store = offloaded
    handle = await SegmentLedgerOffloader(store).read_offloaded(0, UUID)
    assert [e.payload for e in await handle.read(0, len(ENTRIES) - 1)] == ENTRIES
    ranges = [r for _, r in store.gets[1:]]
    assert all(r is not None and r.length <= 8 * MiB for r in ranges)
    assert len(ranges) == 6  # 41 blocks of about 1 MiB, eight a GET
