"""A store opened read-only refuses every write, sends nothing, and reads as its inner store."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tieredstore.errors import InvalidArgument, ReadOnly
from tieredstore.objectstore import (
    ByteRange,
    MemoryObjectStore,
    ObjectStore,
    ReadOnlyObjectStore,
    read_only,
)
from tieredstore.store import AsyncMessageStore, ReadOnlyMessageStore

WRITES: dict[str, Callable[[ObjectStore], Awaitable[object]]] = {
    "put": lambda s: s.put("a/new", b"x"),
    "delete": lambda s: s.delete("a/old"),
    "delete_many": lambda s: s.delete_many(["a/old"]),
    "create_multipart": lambda s: s.create_multipart("a/big"),
    "upload_part": lambda s: s.upload_part("a/big", "u", 1, b"x"),
    "upload_part_copy": lambda s: s.upload_part_copy("a/big", "u", 1, "a/old", ByteRange(0, 1)),
    "complete_multipart": lambda s: s.complete_multipart("a/big", "u", []),
    "abort_multipart": lambda s: s.abort_multipart("a/big", "u"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_every_write_is_refused_and_nothing_is_sent(write: str) -> None:
    inner = MemoryObjectStore()
    await inner.put("a/old", b"kept")
    inner.metrics.reset()
    store = read_only(inner)
    assert not store.supports_writes and store.temporary_files is None
    with pytest.raises(ReadOnly, match="open for reading only") as refused:
        await WRITES[write](store)
    assert refused.value.key in ("a/new", "a/old", "a/big")
    assert inner.metrics.requests == {}  # nothing reached the store
    assert await inner.get("a/old") == b"kept"
    assert await store.get("a/old") == b"kept"  # reads pass
    assert [o.key for o in await store.list_all("a/")] == ["a/old"]


async def test_read_only_is_idempotent_and_a_writer_refuses_it() -> None:
    inner = MemoryObjectStore()
    once = read_only(inner)
    assert isinstance(once, ReadOnlyObjectStore) and read_only(once) is once
    with pytest.raises(InvalidArgument, match=r"store.*reading only"):
        await AsyncMessageStore.open(store=once)
    assert inner.metrics.requests == {}


async def test_a_read_only_view_reads_through_a_read_only_store() -> None:
    inner = MemoryObjectStore()
    async with ReadOnlyMessageStore.open(store=inner) as view:
        assert not view.store.supports_writes
        with pytest.raises(ReadOnly):
            await view.store.put("x", b"y")
