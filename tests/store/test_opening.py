"""The async stores' ``open`` is awaited, or entered with ``async with`` as the
sync store's is entered with ``with``: the store, closed when the block ends."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.conftest import small_config
from tieredstore.errors import StoreClosed
from tieredstore.store import AsyncMessageStore, ReadOnlyMessageStore


async def test_async_with_open_gives_the_store_and_closes_it(tmp_path: Path) -> None:
    config = small_config(backend="local", local_path=str(tmp_path / "data"),
                          local_fsync=False)
    async with AsyncMessageStore.open(config) as store:
        assert isinstance(store, AsyncMessageStore)
        assert await store.append("orders", 0, b"hello") == 0
        await store.flush()
    with pytest.raises(StoreClosed):
        await store.append("orders", 0, b"after")
    async with AsyncMessageStore.open_read_only(config) as reader:
        assert [m.body for m in await reader.get("orders", 0, 0)] == [b"hello"]
    async with ReadOnlyMessageStore.open(config) as reader:
        assert await reader.max_offset("orders", 0) == 1
    store = await AsyncMessageStore.open(config)  # awaited: the caller closes it
    try:
        assert await store.max_offset("orders", 0) == 1
    finally:
        await store.close()


async def test_a_failed_open_in_async_with_raises_and_leaves_nothing_to_close(
        tmp_path: Path) -> None:
    config = small_config(backend="local", local_path=str(tmp_path / "data"))
    with pytest.raises(TypeError):
        async with AsyncMessageStore.open(config, topic_reserved_time=7):  # type: ignore[arg-type]
            pytest.fail("the block ran")
