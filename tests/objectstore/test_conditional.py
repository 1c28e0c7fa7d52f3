"""create_once: a conditional create tells a lost reply of its own from another writer's object."""

from __future__ import annotations

from tieredstore.objectstore import MemoryObjectStore
from tieredstore.objectstore.conditional import create_once


async def test_a_retry_that_finds_its_own_bytes_succeeded() -> None:
    store = MemoryObjectStore()
    assert await create_once(store, "head-1", b"session-a")
    assert await create_once(store, "head-1", b"session-a")  # the reply was lost: a retry


async def test_another_writers_bytes_lose_the_race() -> None:
    store = MemoryObjectStore()
    assert await create_once(store, "head-1", b"session-b")
    assert not await create_once(store, "head-1", b"session-a")
    assert await store.get("head-1") == b"session-b"


async def test_by_metadata_equal_bytes_of_another_writer_are_not_ours() -> None:
    store = MemoryObjectStore()
    theirs = {"writer": "b", "crc32c": "00000000"}
    assert await create_once(store, "fence", b"", metadata=theirs, compare="metadata")
    ours = {"writer": "a", "crc32c": "00000000"}
    assert not await create_once(store, "fence", b"", metadata=ours, compare="metadata")
    assert await create_once(store, "fence", b"", metadata=theirs, compare="metadata")

