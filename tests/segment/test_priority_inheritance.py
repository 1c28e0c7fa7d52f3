"""A segment's lock passes the waiter's priority on to its holder: a host
commit waiting for a segment that compaction holds does not wait behind the
request governor's queue of background work (priority inversion)."""

from __future__ import annotations

import asyncio

from tieredstore.checksum import crc32c
from tieredstore.objectstore import Chokepoint, GovernorOptions, MemoryObjectStore, RetryPolicy
from tieredstore.segment import ChunkedSegment, FileType, SegmentPath
from tieredstore.segment.layout import ChunkRef
from tieredstore.segment.reader import DirectReader
from tieredstore.tasks import Background, Priority
from tieredstore.testing import FaultSchedule, FaultyObjectStore

PATH = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
FAST = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, timeout=30.0)
PUT_RATE = 10.0
CROWD = 100  # read-ahead PUTs queued: about 9 s of the budget


async def test_a_host_commit_waiting_for_compactions_lock_lifts_its_requests() -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    governed = Chokepoint(FAST, governor=GovernorOptions(put_rate=PUT_RATE, burst=1.0))
    store = FaultyObjectStore(inner, FaultSchedule(seed=0, rate=0.0), chokepoint=governed)
    segment = ChunkedSegment(store, PATH, reader=DirectReader(store))
    pieces = [b"a" * 10, b"b" * 10, b"c" * 10]
    for i, data in enumerate(pieces):
        await inner.put(f"log/log-{i}", data)
        segment.borrow(ChunkRef(10 * i, 10, f"log/log-{i}", 0, crc32c(data)))
    background = Background()

    async def crowd() -> None:  # higher than compaction, lower than the host
        await asyncio.gather(*(store.put(f"other/{i}", b"x") for i in range(CROWD)))

    crowding = background.start(crowd(), "read-ahead", priority=Priority.READ_AHEAD)
    await asyncio.sleep(0.05)  # the bucket drained, the crowd waits
    compacting = background.start(segment.compact(), "compact", priority=Priority.COMPACTION)
    await asyncio.sleep(0.05)  # compaction holds the lock, its PUT waits
    assert not compacting.done()
    # Without inheritance the host waits until the crowd is through (~9 s).
    await asyncio.wait_for(segment.commit0(30, b"d" * 10), timeout=4.0)
    assert compacting.done() and not crowding.done()
    assert [(u.position, u.end) for u in segment.layout.units] == [(0, 30), (30, 40)]
    assert await segment.read0(0, 40) == b"".join(pieces) + b"d" * 10
    await background.close()
