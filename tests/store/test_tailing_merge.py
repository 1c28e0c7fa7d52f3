"""A tailing reader across a roll and its merge: the merged segment's units are
built from the chunks this process wrote and still holds, so reading its
just-flushed messages back costs no GET."""

from __future__ import annotations

import asyncio

from tests.store.conftest import small_config
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import FileType, SegmentState
from tieredstore.store import AsyncMessageStore, list_flat_file


async def test_reading_back_merged_segments_costs_no_get() -> None:
    backend = MemoryObjectStore()
    config = small_config(gc_interval=0.0)
    ms = await AsyncMessageStore.open(config, store=backend)
    bodies = [bytes([i % 251]) * 500 for i in range(300)]
    for body in bodies:
        await ms.append("t", 0, body)
    await ms.flush()

    async def merged() -> int:
        listed = await list_flat_file(backend, config, "t", 0, FileType.COMMIT_LOG)
        return sum(1 for s in listed.values() if s.state is SegmentState.SEALED)

    for _ in range(200):  # merges run in the background
        if await merged() >= 3:
            break
        await asyncio.sleep(0.02)
    assert await merged() >= 3, "the commit log did not roll and merge"
    await asyncio.sleep(0.1)
    gets = backend.metrics.requests.get("get", 0)
    got = []
    while len(got) < len(bodies):
        got += await ms.get("t", 0, len(got), max_count=64)
    assert [m.body for m in got] == bodies
    assert backend.metrics.requests.get("get", 0) == gets, "read merged bytes back by GET"
    assert ms.snapshot()["fetcher"]["carried_units"] > 0
    await ms.close()
