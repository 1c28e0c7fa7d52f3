"""Rolling by time on a timer: a queue that went quiet still rolls, so its
segments are sealed, merged and expire; the timer uses the store's clock, not
the messages' timestamps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from tests.store.conftest import Opener
from tests.store.test_store_api import sealed_records
from tieredstore.objectstore import ObjectStore
from tieredstore.segment import FileType
from tieredstore.store import AsyncMessageStore, OffsetOutOfRange


async def wait_for(what: str, check: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + 10.0
    while True:
        if await check():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def records(backend: ObjectStore, ms: AsyncMessageStore, file_type: FileType
                  ) -> list[tuple[int, int]]:
    return [(r.first_message_offset, r.last_message_offset)
            for r in await sealed_records(backend, ms.config, "t", 0, file_type)]


async def test_a_quiet_queue_rolls_on_the_timer_and_reads_back(
        open_store: Opener, backend: ObjectStore) -> None:
    ms = await open_store(rolling_interval=0.3, gc_interval=0.0)
    for i in range(5):
        await ms.append("t", 0, b"m%d" % i)
    # No append and no flush after these: only the timer can roll the queue.

    async def both_rolled() -> bool:
        return (await records(backend, ms, FileType.COMMIT_LOG) == [(0, 4)]
                and await records(backend, ms, FileType.CONSUME_QUEUE) == [(0, 4)])

    await wait_for("the quiet queue's segments to roll", both_rolled)
    assert [m.body for m in await ms.get("t", 0, 0, max_count=10)] == [
        b"m%d" % i for i in range(5)]
    assert await ms.append("t", 0, b"after") == 5  # the next segment takes appends
    await ms.close()
    reopened = await open_store(rolling_interval=0.0)
    assert [m.body for m in await reopened.get("t", 0, 0, max_count=10)] == [
        *(b"m%d" % i for i in range(5)), b"after"]
    await reopened.close()


async def test_a_queue_rolled_by_time_expires_by_the_retention_timer(
        open_store: Opener, backend: ObjectStore) -> None:
    ms = await open_store(rolling_interval=0.3, gc_interval=0.0, file_reserved_time=0.0,
                          retention_interval=0.2, timestamp_before_max=float("inf"))
    for i in range(5):
        await ms.append("t", 0, b"m%d" % i, timestamp=1_000_000 + i)

    async def expired() -> bool:
        return await ms.min_offset("t", 0) == 5

    await wait_for("the rolled segments to expire", expired)
    try:
        await ms.get("t", 0, 0)
    except OffsetOutOfRange:
        pass
    else:
        raise AssertionError("offset 0 was deleted by retention, yet get returned it")
    await ms.close()


async def test_old_message_timestamps_do_not_make_the_timer_roll(
        open_store: Opener, backend: ObjectStore) -> None:
    """A host importing history stamps messages days back: the timer measures the
    segment's age on the store's clock, so the segment is not rolled at once."""
    ms = await open_store(rolling_interval=1.0, gc_interval=0.0)
    for i in range(3):
        await ms.append("t", 0, b"old", timestamp=1_000_000 + i)
    await ms.flush()
    await asyncio.sleep(0.4)  # four checks of the timer
    assert await records(backend, ms, FileType.COMMIT_LOG) == []
    await ms.close()


async def test_no_timer_with_rolling_interval_zero(
        open_store: Opener, backend: ObjectStore) -> None:
    ms = await open_store(rolling_interval=0.0, gc_interval=0.0)
    await ms.append("t", 0, b"x")
    await ms.flush()
    await asyncio.sleep(0.3)
    assert await records(backend, ms, FileType.COMMIT_LOG) == []
    await ms.close()
