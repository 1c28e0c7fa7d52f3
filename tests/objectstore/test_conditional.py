"""create_once: a conditional create tells a lost reply of its own from another
writer's object, through reads damaged on the way."""

from __future__ import annotations

from tieredstore.objectstore import ForwardingObjectStore, MemoryObjectStore
from tieredstore.objectstore.base import ByteRange, ObjectData
from tieredstore.objectstore.conditional import create_once
from tieredstore.objectstore.reads import crc_metadata


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


async def test_a_retry_that_finds_its_own_bytes_succeeded() -> None:
    store = MemoryObjectStore()
    assert await create_once(store, "head-1", b"session-a")
    assert await create_once(store, "head-1", b"session-a")  # the reply was lost: a retry


async def test_another_writers_bytes_lose_the_race() -> None:
    store = MemoryObjectStore()
    assert await create_once(store, "head-1", b"session-b")
    assert not await create_once(store, "head-1", b"session-a")
    assert await store.get("head-1") == b"session-b"


async def test_identical_damaged_reads_are_not_another_writers_object() -> None:
    inner = MemoryObjectStore()
    ours = b'{"size": 18972}'
    await inner.put("marker", ours, metadata=crc_metadata(ours))
    assert await create_once(SameFlip(inner, 3), "marker", ours, metadata=crc_metadata(ours))


async def test_without_a_crc_two_equal_reads_decide() -> None:
    inner = MemoryObjectStore()
    await inner.put("marker", b"x")
    assert not await create_once(SameFlip(inner, 2), "marker", b"x")


async def test_by_metadata_equal_bytes_of_another_writer_are_not_ours() -> None:
    store = MemoryObjectStore()
    theirs = {"writer": "b", "crc32c": "00000000"}
    assert await create_once(store, "fence", b"", metadata=theirs, compare="metadata")
    ours = {"writer": "a", "crc32c": "00000000"}
    assert not await create_once(store, "fence", b"", metadata=ours, compare="metadata")
    assert await create_once(store, "fence", b"", metadata=theirs, compare="metadata")
