"""A queue's metadata passes the waiting writer's priority on to the one
writing: the host's head write waiting for a merge's (finishing, it records
its segment) does not wait behind the request governor's queue of read-ahead
work (priority inversion)."""

from __future__ import annotations

import asyncio

from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import Chokepoint, GovernorOptions, MemoryObjectStore, RetryPolicy
from tieredstore.tasks import Background, Priority

QUEUE = QueuePath("root", "t", 0)
PUT_RATE = 10.0
CROWD = 200  # read-ahead PUTs queued: about 20 s of the budget


async def test_a_host_head_write_waiting_for_a_merges_lifts_its_requests() -> None:
    choke = Chokepoint(RetryPolicy(max_attempts=3, base_delay=0.0, timeout=60.0),
                       governor=GovernorOptions(put_rate=PUT_RATE, burst=1.0))
    store = MemoryObjectStore(chokepoint=choke)
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=3)
    background = Background()

    async def crowd() -> None:  # higher than a merge, lower than the host
        await asyncio.gather(*(store.put(f"other/{i}", b"x") for i in range(CROWD)))

    background.start(crowd(), "read-ahead", priority=Priority.READ_AHEAD)
    await asyncio.sleep(0.1)  # the bucket drained, the crowd waits
    merge = background.start(md.set_properties(merged="1"), "merge", priority=Priority.MERGE)
    await asyncio.sleep(0.1)  # the merge's head write holds the lock and waits
    assert not merge.done()
    # Without inheritance the host waits until the crowd is through (~20 s).
    await asyncio.wait_for(md.set_properties(flushed="1"), timeout=6.0)
    assert merge.done()
    assert md.properties.get("merged") == "1" and md.properties.get("flushed") == "1"
    await background.close()
