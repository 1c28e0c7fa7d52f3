"""Damage stays local: a bad byte makes only its own range unreadable."""

from __future__ import annotations

import pytest

from tests.store.conftest import small_config
from tieredstore.errors import TieredStoreError
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore

COUNT = 400


def body(offset: int) -> bytes:
    return f"{offset:06d}".encode() * 80


async def build(backend: ObjectStore) -> None:
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    for i in range(COUNT):
        await store.append("t", 0, body(i))
    await store.close()


async def flip(backend: ObjectStore, key: str, at: int) -> None:
    """One byte changed, the object's metadata (its stored CRC) kept."""
    got = await backend.get_object(key)
    data = bytearray(got.data)
    data[at] ^= 0x01
    await backend.put(key, bytes(data), metadata=dict(got.info.metadata))


async def read_around(store: AsyncMessageStore) -> tuple[dict[int, bytes], list[str]]:
    """Read the whole queue a batch at a time, stepping over what cannot be read:
    the messages read, and the errors met (one per unreadable offset)."""
    got: dict[int, bytes] = {}
    errors: list[str] = []
    offset = 0
    while offset < COUNT:
        try:
            batch = await store.get("t", 0, offset, max_count=64)
        except TieredStoreError as exc:
            errors.append(f"{offset}: {exc}")
            offset += 1
            continue
        assert batch, f"no message and no error at {offset}"
        for m in batch:
            got[m.offset] = m.body
        offset = batch[-1].offset + 1
    return got, errors


@pytest.mark.parametrize("file_type", ["commitlog", "consumequeue"])
async def test_one_bad_byte_in_a_merged_segment(file_type: str) -> None:
    backend = MemoryObjectStore()
    await build(backend)
    merged = sorted(o.key for o in await backend.list_all("")
                    if f"/{file_type}/" in o.key and o.key.endswith("/segment"))
    assert len(merged) >= 2
    await flip(backend, merged[1], 100)
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    assert store.corrupt == {}
    got, errors = await read_around(store)
    await store.close()
    assert errors, "the damage went unnoticed"
    assert all("segment" in e or "consume queue" in e or "unit" in e for e in errors), errors
    lost = COUNT - len(got)
    assert lost == len(errors)
    assert 0 < lost <= 64, f"{lost} messages unreadable for one bad byte"
    for offset, data in got.items():
        assert data == body(offset)  # never wrong bytes
    bad = sorted(set(range(COUNT)) - set(got))
    assert bad == list(range(bad[0], bad[-1] + 1)), "the unreadable range is not one range"


async def test_get_returns_the_good_messages_before_a_bad_record() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    merged = sorted(o.key for o in await backend.list_all("")
                    if "/commitlog/" in o.key and o.key.endswith("/segment"))
    await flip(backend, merged[0], 5000)
    store = await AsyncMessageStore.open(small_config(gc_interval=0), store=backend)
    first = await store.get("t", 0, 0, max_count=COUNT)
    assert 0 < len(first) < COUNT
    assert [m.body for m in first] == [body(i) for i in range(len(first))]
    with pytest.raises(TieredStoreError, match="segment"):
        await store.get("t", 0, len(first), max_count=COUNT)
    await store.close()
