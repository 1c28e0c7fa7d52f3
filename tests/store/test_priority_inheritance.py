"""A queue's lock passes the waiting host's priority on to its holder: an append
waiting for the lock that retention (GC) holds does not wait behind the request
governor's queue of read-ahead work (priority inversion). The budget is set
once the data is written, on the store's own chokepoint."""

from __future__ import annotations

import asyncio

from tests.store.conftest import small_config
from tieredstore.objectstore import (
    Chokepoint,
    Governor,
    GovernorOptions,
    MemoryObjectStore,
    RetryPolicy,
)
from tieredstore.store import AsyncMessageStore
from tieredstore.tasks import Background, Priority

KiB = 1024
PUT_RATE = 20.0
MESSAGES = 200
CROWD = 400  # read-ahead PUTs queued: about 20 s of the budget


async def test_an_append_waiting_for_retentions_lock_lifts_its_requests() -> None:
    choke = Chokepoint(RetryPolicy(max_attempts=3, base_delay=0.0, timeout=60.0))
    bucket = MemoryObjectStore(chokepoint=choke)
    config = small_config(commit_log_max_size=8 * KiB, chunk_size=1 * KiB,
                          consume_queue_max_size=1 * KiB,
                          file_reserved_time=0.0, retention_interval=0.0, gc_interval=0.0,
                          rolling_interval=0.0)
    store = await AsyncMessageStore.open(config, store=bucket)
    background = Background()
    try:
        for n in range(MESSAGES):
            await store.append("orders", 0, b"%d|" % n * 30, timestamp=1_700_000_000_000)
        await store.flush()
        await store.wait_idle()
        choke.governor = Governor(GovernorOptions(put_rate=PUT_RATE, burst=1.0))

        async def crowd() -> None:  # higher than GC, lower than the host
            await asyncio.gather(*(bucket.put(f"other/{i}", b"x") for i in range(CROWD)))

        background.start(crowd(), "read-ahead", priority=Priority.READ_AHEAD)
        await asyncio.sleep(0.1)  # the bucket drained, the crowd waits
        retention = background.start(store.delete_expired(now=2_000_000_000), "retention",
                                     priority=Priority.GC)
        await asyncio.sleep(0.1)  # retention holds the queue's lock, its requests wait
        assert not retention.done()
        # Without inheritance the append waits until the crowd is through (~20 s).
        offset = await asyncio.wait_for(store.append("orders", 0, b"late"), timeout=8.0)
        assert offset == MESSAGES
        assert await asyncio.wait_for(retention, timeout=8.0) > 0
    finally:
        await background.close()
        choke.governor = None
        await store.close()
