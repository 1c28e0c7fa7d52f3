"""A takeover across the two write modes: the newest open wins whatever the modes.

A store in either write mode that opens a broker fences every series an older
store in either mode could write: the broker's log (the log mode's group
commits) as well as each queue's head and chunk series (docs/writers.md,
"Writers", and docs/log-objects.md, "The log fence"). So the old store's next
flush fails, whatever it wrote before the takeover (nothing: idle; or some
messages: busy), and only what the new store acknowledged follows what was
there. Before, a direct-mode store fenced the log only when it already held
log objects: an idle log-mode store's flush returned the offset the new store
had acknowledged too, and the queue read as corrupt after a reopen (or, with
bodies of one length, lost the old store's message silently).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

import pytest

from tests.store.conftest import small_config
from tests.store.test_failover import FENCED, close_quietly, read_bodies
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore

LOG_DIR = "/default-cluster/broker-0/log/"
MODES = [("log", "direct"), ("direct", "log"), ("log", "log"), ("direct", "direct")]


def config(write_mode: str, **overrides: Any) -> Any:
    """Group commits on flush only; no background GC or retention to race with."""
    return small_config(write_mode=write_mode, group_commit_interval=60.0, gc_interval=0.0,
                        retention_interval=0.0, **overrides)


def body(who: str, n: int, size: int) -> bytes:
    return (f"{who}{n:04d}".encode() * (size // 5 + 1))[:size]


async def a_queue_written_before(bucket: ObjectStore) -> list[bytes]:
    """Five messages of ``t/0`` written (in the direct mode: the log holds no log
    object) by a store since closed."""
    written = [body("s", i, 100) for i in range(5)]
    store = await AsyncMessageStore.open(config("direct"), store=bucket, writer_id="seed")
    for data in written:
        await store.append("t", 0, data)
    await store.flush()
    await store.close()
    return written


async def read_back(bucket: ObjectStore, write_mode: str) -> list[bytes]:
    reader = await AsyncMessageStore.open(config(write_mode), store=bucket, writer_id="reader")
    try:
        assert reader.corrupt == {}
        return await read_bodies(reader)
    finally:
        await reader.close()


@pytest.mark.parametrize(("old_mode", "new_mode"), MODES)
@pytest.mark.parametrize("old_writes", [0, 3], ids=["idle", "busy"])
@pytest.mark.parametrize("old_size", [100, 140], ids=["equal_bodies", "unequal_bodies"])
async def test_a_newer_store_in_either_mode_fences_the_older_one(
        old_mode: str, new_mode: str, old_writes: int, old_size: int) -> None:
    bucket = MemoryObjectStore()
    expected = await a_queue_written_before(bucket)
    old = await AsyncMessageStore.open(config(old_mode), store=bucket, writer_id="old")
    for i in range(old_writes):
        data = body("o", i, 100)
        assert await old.append("t", 0, data) == len(expected)
        await old.flush()
        expected.append(data)
    new = await AsyncMessageStore.open(config(new_mode), store=bucket, writer_id="new")
    for i in range(2):
        data = body("n", i, 100)
        assert await new.append("t", 0, data) == len(expected)
        await new.flush()
        expected.append(data)
    with pytest.raises(FENCED):
        await old.append("t", 0, body("o", 99, old_size))
        await old.flush()
    await close_quietly(old)
    await new.close()
    for mode in ("log", "direct"):
        assert await read_back(bucket, mode) == expected


async def test_an_idle_log_mode_store_looks_before_it_writes_after_a_direct_takeover() -> None:
    """The direct-mode store deletes the fences below its own once they are
    ``gc_safety_age`` old, as a log-mode store does, but never its own: the
    idle log-mode store it replaced is fenced long after, and the fences of
    earlier opens do not pile up."""
    bucket = MemoryObjectStore()
    expected = await a_queue_written_before(bucket)
    old = await AsyncMessageStore.open(config("log", gc_safety_age=0.2), store=bucket,
                                       writer_id="old")
    new = await AsyncMessageStore.open(config("direct", gc_safety_age=0.2), store=bucket,
                                       writer_id="new")
    assert await new.append("t", 0, body("n", 0, 100)) == len(expected)
    await new.flush()
    expected.append(body("n", 0, 100))
    await new.compact_log(time.time() + 1)
    entries = [o for o in await bucket.list_all("tieredstore/") if LOG_DIR in o.key]
    assert len(entries) == 1 and entries[0].size == 0  # the new store's fence only
    await asyncio.sleep(0.15)  # idle past gc_safety_age / 2
    with pytest.raises(FENCED):
        await old.append("t", 0, body("o", 0, 100))
        await old.flush()
    with contextlib.suppress(*FENCED):
        await old.close()
    await new.close()
    assert await read_back(bucket, "direct") == expected
