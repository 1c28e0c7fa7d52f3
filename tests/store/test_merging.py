"""Thousands of rolls with their merges running concurrently leave no stale
``merging.<type>`` entry: the property is updated under the metadata's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.store.conftest import small_config
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import LocalObjectStore, MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore
from tieredstore.store.keys import metadata_root


@pytest.mark.parametrize("kind", ["memory", "local"])
async def test_2600_rolls_with_concurrent_merges_leave_no_stale_entry(kind: str,
                                                                      tmp_path: Path) -> None:
    backend: ObjectStore = (MemoryObjectStore() if kind == "memory"
                            else LocalObjectStore(tmp_path, fsync=False))
    # 1 KiB segments of both files: every few messages roll both, and each roll
    # starts a merge in the background while the next rolls go on.
    config = small_config(commit_log_max_size=1024, consume_queue_max_size=1024,
                          chunk_size=1024, max_message_size=512, gc_interval=0)
    store = await AsyncMessageStore.open(config, store=backend)
    count = 5000  # two records a commit-log segment, 32 units a consume-queue one
    for i in range(count):
        await store.append("t", 0, b"x" * 400)
        if i % 50 == 0:
            await store.flush()
    await store.close()  # drains the merges
    head = await QueueMetadata.open_read_only(backend, QueuePath(metadata_root(config), "t", 0))
    rolls = 0
    for file_type in head.file_types:
        rolls += len([r async for r in head.records(file_type)])
    assert rolls >= 2600
    stale = {k: v for k, v in head.properties.items() if k.startswith("merging.") and v}
    assert stale == {}, f"{sum(len(v.split(',')) for v in stale.values())} stale entries"
    puts_before = backend.metrics.total_requests("put")
    again = await AsyncMessageStore.open(config, store=backend)
    got = await again.get("t", 0, 0, max_count=count)
    assert len(got) == count
    await again.close()
    # the reopen writes its claim and fences, not a head per stale merge
    assert backend.metrics.total_requests("put") - puts_before <= 6
