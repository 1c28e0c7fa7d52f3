"""verify_queue, the one verifier: every message and CRC checked, damage named
by offset, and the queue's segments counted as ``inspect`` and Spark's ``stats``
count them (QueueSummary.segments), on an intact and on a damaged store."""

from __future__ import annotations

import re

from tests.store.conftest import small_config
from tests.store.test_damage import COUNT, build, flip
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.store import summarize, verify_queue


async def test_verify_queue_checks_every_message_and_counts_the_segments_once() -> None:
    backend = MemoryObjectStore()
    await build(backend)
    config = small_config(gc_interval=0)
    check = await verify_queue(backend, config, "t", 0)
    summary = await summarize(backend, config, "t", 0, timestamps=False)
    assert check.errors == []
    assert (check.min_offset, check.max_offset, check.messages) == (0, COUNT, COUNT)
    assert check.segments == summary.segments > 3  # sealed ones, and the active ones
    assert check.units > 0 and check.bytes > 0

    merged = sorted(o.key for o in await backend.list_all("")
                    if "/commitlog/" in o.key and o.key.endswith("/segment"))
    await flip(backend, merged[1], 100)
    damaged = await verify_queue(backend, config, "t", 0)
    assert damaged.segments == summary.segments  # the same segments, damaged or not
    assert len(damaged.errors) == 1, damaged.errors
    found = re.match(r"t/0: offsets? (\d+)(?:\.\.(\d+))?: .*CRC32C", damaged.errors[0])
    assert found, damaged.errors
    bad = int(found.group(2) or found.group(1)) - int(found.group(1)) + 1
    assert damaged.messages == COUNT - bad
