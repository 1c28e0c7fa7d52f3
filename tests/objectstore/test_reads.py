"""stored_matches: telling our own object from another writer's, through damage."""

from __future__ import annotations

from tieredstore.objectstore import MemoryObjectStore
from tieredstore.objectstore.base import ByteRange, ObjectData
from tieredstore.objectstore.reads import crc_metadata, stored_matches
from tieredstore.testing.forwarding import ForwardingObjectStore


class SameFlip(ForwardingObjectStore):
    """The first ``times`` GETs come back with the same bit flipped."""

    def __init__(self, inner: MemoryObjectStore, times: int) -> None:
        super().__init__(inner)
        self.times = times

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got = await super().get_object(key, byte_range)
        if self.times <= 0:
            return got
        self.times -= 1
        data = bytearray(got.data)
        data[0] ^= 0x01
        return ObjectData(bytes(data), got.info)


async def test_identical_damaged_reads_are_not_another_writers_object() -> None:
    inner = MemoryObjectStore()
    ours = b'{"size": 18972}'
    await inner.put("marker", ours, metadata=crc_metadata(ours))
    assert await stored_matches(SameFlip(inner, 3), "marker", lambda d: d == ours)


async def test_another_writers_object_is_told_apart() -> None:
    inner = MemoryObjectStore()
    theirs = b'{"size": 1}'
    await inner.put("marker", theirs, metadata=crc_metadata(theirs))
    assert not await stored_matches(inner, "marker", lambda d: d == b'{"size": 18972}')


async def test_without_a_crc_two_equal_reads_decide() -> None:
    inner = MemoryObjectStore()
    await inner.put("marker", b"x")
    assert not await stored_matches(SameFlip(inner, 2), "marker", lambda d: d == b"x")
