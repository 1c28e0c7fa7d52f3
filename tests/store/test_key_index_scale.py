"""A key lookup over 1,000,000 messages in 1,000 keys costs a few GETs (local
directory backend, default settings but for the flush timing): the sealed
index segments' slot objects, the active index segment, and the commit-log
ranges of the messages found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tieredstore.config import load_config
from tieredstore.objectstore import LocalObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore
from tieredstore.store.base.outgoing import Outgoing
from tieredstore.testing import ForwardingObjectStore

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
MESSAGES = 1_000_000
KEYS = 1000
BATCH = 1000


class _Gets(ForwardingObjectStore):
    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.gets: list[str] = []

    async def get_object(self, key: str, byte_range: Any = None) -> Any:
        self.gets.append(key)
        return await super().get_object(key, byte_range)


async def test_a_lookup_over_a_million_messages_costs_a_few_gets(tmp_path: Path) -> None:
    config = load_config(env={}, backend="local", local_path=str(tmp_path / "data"),
                         gc_interval=0, timestamp_before_max=float("inf"))
    backend = LocalObjectStore(tmp_path / "data", fsync=False)
    store = await AsyncMessageStore.open(config, store=backend)
    for first in range(0, MESSAGES, BATCH):
        await store.append_batch("t", 0, [
            Outgoing(b"m%07d" % i, keys=(f"key-{i % KEYS}",), timestamp=T0 + i)
            for i in range(first, first + BATCH)])
    await store.close()
    sealed = [o.key for o in await backend.list_all("") if o.key.endswith("/slots")]
    assert len(sealed) >= 1, "the index should have a sealed segment at this size"

    counting = _Gets(backend)
    store = await AsyncMessageStore.open(config, store=counting)
    await store.wait_idle()  # its claim of the queue, in the background
    counting.gets.clear()
    found = await store.query_by_key("t", "key-7", max_count=MESSAGES)
    assert [m.offset for m in found] == list(range(7, MESSAGES, KEYS))
    assert all(m.body == b"m%07d" % m.offset and m.keys == ("key-7",) for m in found)
    slot_gets = [k for k in counting.gets if k.endswith("/slots")]
    assert len(slot_gets) == 2 * len(sealed)
    # Every match (1,000): slot objects, the active index segment, commit-log ranges.
    assert len(counting.gets) <= 12, counting.gets

    counting.gets.clear()
    newest = await store.query_by_key("t", "key-9", max_count=64)
    assert [m.offset for m in newest] == list(range(9, MESSAGES, KEYS))[-64:]
    assert len(counting.gets) <= 8, counting.gets

    counting.gets.clear()
    begin = T0 + MESSAGES // 2
    narrow = await store.query_by_key("t", "key-8", begin, begin + 9_999)
    assert [m.offset for m in narrow] == [i for i in range(begin - T0, begin - T0 + 10_000)
                                          if i % KEYS == 8]
    assert len(counting.gets) <= 4, counting.gets
    await store.close()
