"""A damaged newest head falls back to the newest valid one before it."""

from __future__ import annotations

import pytest

from tests.metadata.helpers import DamagedReads, record
from tieredstore.metadata import (
    COMMIT_LOG,
    CorruptMetadata,
    QueueMetadata,
    QueuePath,
)
from tieredstore.objectstore import MemoryObjectStore, ObjectStore

QUEUE = QueuePath("root", "orders", 0)


async def flip_a_byte(store: ObjectStore, key: str, at: int = -3) -> None:
    data = bytearray(await store.get(key))
    data[at] ^= 0x40
    await store.put(key, bytes(data))


async def head_keys(store: ObjectStore) -> list[str]:
    return [o.key for o in await store.list_all(QUEUE.heads_prefix)]


async def test_a_flipped_byte_in_the_newest_head_falls_back_to_the_one_before() -> None:
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=4)
    await md.append(record(0))
    await md.set_properties(note="second")
    newest = (await head_keys(store))[-1]
    await flip_a_byte(store, newest)

    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert "note" not in reader.properties  # the newest head's change is what was lost
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(0)]

    writer = await QueueMetadata.open(store, QUEUE, writer_id="w2")  # claims past it
    await writer.append(record(1))
    again = await QueueMetadata.open_read_only(store, QUEUE)
    assert [r async for r in again.records(COMMIT_LOG)] == [record(0), record(1)]
    assert (await head_keys(store))[-1] > newest


async def test_no_valid_head_is_an_error_naming_the_damage() -> None:
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w")
    await md.append(record(0))
    await md.append(record(1))
    for key in await head_keys(store):
        await flip_a_byte(store, key)
    with pytest.raises(CorruptMetadata, match="head-"):
        await QueueMetadata.open_read_only(store, QUEUE)


async def test_a_head_read_cut_short_the_same_way_twice_is_read_again() -> None:
    """Two identical damaged reads mean damage at rest, unless they are shorter
    than the object: a cut on the way, however often the same one comes back."""
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w")
    await md.append(record(0))
    await md.set_properties(note="newest")
    cut_short = DamagedReads(store, "/heads/", 2, lambda data: data[:10])
    reader = await QueueMetadata.open_read_only(cut_short, QUEUE)
    assert reader.properties["note"] == "newest"  # not the head before it
