"""A replaced writer deletes nothing its successor needs (docs/gc.md,
*Deletes and their fences*): its retention is fenced before it deletes, and
what it saw while being fenced does not steer its garbage collection."""

from __future__ import annotations

import pytest

from tests.store.conftest import small_config
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore

T0 = 1_700_000_000_000
DAY_S = 86_400


async def produce(store: AsyncMessageStore, first: int, count: int) -> None:
    for i in range(first, first + count):
        await store.append("t", 0, b"m" * 700, timestamp=T0 + i * 1000)
    await store.flush()


async def segment_objects(backend: ObjectStore) -> set[str]:
    return {o.key for o in await backend.list_all("") if "/seg-" in o.key}


async def test_a_replaced_writers_retention_and_gc_delete_nothing_of_its_successor() -> None:
    """A is replaced by B, which goes on writing (rolls write heads; heads older
    than the newest two are deleted, so A's next head key is free again). A's
    retention lands a head on that key, is fenced by the listing after it, and
    deletes nothing; its GC pass after that must not take that head's first
    pointers as the queue's: B's segments all stay, every message reads."""
    backend = MemoryObjectStore()
    config = small_config(gc_interval=0, retention_interval=0, merge_on_seal=False)
    a = await AsyncMessageStore.open(config, store=backend)
    await produce(a, 0, 300)
    b = await AsyncMessageStore.open(config, store=backend)
    await produce(b, 300, 300)  # several rolls: several head writes
    kept = await segment_objects(backend)
    with pytest.raises(MetadataFenced):
        await a.delete_expired(now=T0 / 1000 + 600 + 3 * DAY_S)
    assert await segment_objects(backend) == kept
    await a.collect_garbage(safety_age=0)
    assert await b.min_offset("t", 0) == 0
    assert kept <= await segment_objects(backend)
    got = await b.get("t", 0, 0, max_count=1000)
    assert [m.offset for m in got] == list(range(600))
    await b.close()
