"""append_batch: one call for many messages, the same records and offsets as
one append each, rolls inside a batch, and nothing written for a bad batch."""

from __future__ import annotations

import asyncio
import random
import re
from typing import Any

import pytest

from tests.store.conftest import Opener, small_config
from tests.store.test_store_api import sealed_records
from tieredstore.errors import InvalidArgumentType
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.segment import FileType
from tieredstore.store import AsyncMessageStore, MessageStore, MessageTooLarge, Outgoing


async def test_a_batch_reads_back_as_appends_would(open_store: Opener) -> None:
    ms = await open_store()
    assert await ms.append("t", 0, b"single") == 0
    batch = [b"plain", Outgoing(b"full", keys=("k1", "k2"), tags="T",
                                properties={"p": "v"}, timestamp=1_700_000_000_000),
             bytearray(b"mutable"), memoryview(b"view")]
    assert await ms.append_batch("t", 0, batch) == range(1, 5)
    assert await ms.append("t", 0, b"after") == 5
    got = await ms.get("t", 0, 0, max_count=10)
    assert [m.body for m in got] == [b"single", b"plain", b"full", b"mutable", b"view",
                                     b"after"]
    assert [m.offset for m in got] == list(range(6))
    full = got[2]
    assert (full.keys, full.tags, dict(full.properties), full.store_timestamp) == (
        ("k1", "k2"), "T", {"p": "v"}, 1_700_000_000_000)
    await ms.close()
    again = await open_store()
    assert [m.body for m in await again.get("t", 0, 0, max_count=10)] == [
        m.body for m in got]
    await again.close()


async def test_a_batch_rolls_segments_where_appends_would(open_store: Opener,
                                                        backend: ObjectStore) -> None:
    ms = await open_store(commit_log_max_size=8 * 1024, consume_queue_max_size=1024)
    bodies = [bytes([i % 251]) * 700 for i in range(100)]
    assert await ms.append_batch("t", 0, bodies) == range(100)
    await ms.flush()
    cl = await sealed_records(backend, ms.config, "t", 0, FileType.COMMIT_LOG)
    cq = await sealed_records(backend, ms.config, "t", 0, FileType.CONSUME_QUEUE)
    assert len(cl) >= 8 and len(cq) >= 2
    for records in (cl, cq):  # offsets follow on from one segment to the next
        assert [r.first_message_offset for r in records[1:]] == [
            r.last_message_offset + 1 for r in records[:-1]]
        assert all(r.size <= (8 * 1024 if records is cl else 1024) for r in records)
    got = []
    offset = 0
    while offset < 100:
        page = await ms.get("t", 0, offset, max_count=40)
        got.extend(page)
        offset = page[-1].offset + 1
    assert [m.body for m in got] == bodies
    await ms.close()


async def test_a_batch_splits_by_time_as_appends_do(open_store: Opener,
                                                  backend: ObjectStore) -> None:
    ms = await open_store(rolling_interval=1.0)
    batch = [Outgoing(b"x", timestamp=1_000_000 + i * 600) for i in range(6)]  # 0.6 s apart
    await ms.append_batch("t", 0, batch)
    await ms.flush()
    records = await sealed_records(backend, ms.config, "t", 0, FileType.COMMIT_LOG)
    assert [(r.first_message_offset, r.last_message_offset) for r in records] == [
        (0, 1), (2, 3)]
    await ms.close()


@pytest.mark.parametrize(("bad", "error", "text"), [
    ("not bytes", InvalidArgumentType, r"messages\[2\]"),
    (Outgoing(b"x", tags=5), InvalidArgumentType, r"in messages\[2\] of the batch"),  # type: ignore[arg-type]
    (Outgoing(b"x" * 20_000), MessageTooLarge, r"in messages\[2\] of the batch"),
])
async def test_a_bad_message_refuses_the_whole_batch(open_store: Opener, bad: object,
                                                     error: type[Exception], text: str) -> None:
    ms = await open_store()
    await ms.append("t", 0, b"before")
    with pytest.raises(error) as caught:
        await ms.append_batch("t", 0, [b"a", b"b", bad, b"d"])  # type: ignore[list-item]
    assert any(re.search(text, line)
               for line in [str(caught.value), *getattr(caught.value, "__notes__", [])])
    assert await ms.max_offset("t", 0) == 1
    assert await ms.append("t", 0, b"next") == 1
    await ms.close()


async def test_an_empty_batch_and_a_batch_that_is_not_a_list(open_store: Opener) -> None:
    ms = await open_store()
    assert await ms.append_batch("t", 0, []) == range(0, 0)
    with pytest.raises(InvalidArgumentType, match="messages"):
        await ms.append_batch("t", 0, b"bytes")  # type: ignore[arg-type]
    await ms.close()


def test_the_sync_facade_appends_a_batch_in_one_call() -> None:
    with MessageStore.open(small_config(), store=MemoryObjectStore()) as ms:
        assert ms.append_batch("t", 0, [b"%d" % i for i in range(1000)]) == range(1000)
        ms.flush()
        assert [m.body for m in ms.get("t", 0, 998, max_count=5)] == [b"998", b"999"]


async def test_appends_keep_call_order_while_some_wait_for_a_full_pool() -> None:
    """Appends that fit the pool go without the queue lock; while one waits for
    it, later ones queue behind: offsets follow the order of the calls, also
    for producers that wake up (from a pause) just as the lock passes on."""
    rng = random.Random(7)

    class SlowPuts(MemoryObjectStore):
        async def put(self, key: str, data: Any, **kw: Any) -> Any:
            await asyncio.sleep(rng.random() * 0.002)
            return await super().put(key, data, **kw)

    ms = await AsyncMessageStore.open(small_config(pool_bytes=16 * 1024), store=SlowPuts())
    calls: list[int | range | None] = []  # what each append returned, in call order

    async def producer(n: int) -> None:
        for i in range(60):
            await asyncio.sleep(rng.random() * 0.001)
            slot = len(calls)
            calls.append(None)
            if i % 10 == 9:
                calls[slot] = await ms.append_batch("t", 0, [bytes([n]) * 900] * 3)
            else:
                calls[slot] = await ms.append("t", 0, bytes([n]) * rng.randrange(1, 3000))

    await asyncio.gather(*(producer(n) for n in range(6)))
    offsets: list[int] = []
    for got in calls:
        offsets += got if isinstance(got, range) else [got]
    assert offsets == list(range(len(offsets))), offsets
    await ms.close()


async def test_a_batch_of_bodies_and_timestamps_keeps_each_timestamp(
        open_store: Opener) -> None:
    ms = await open_store()
    batch = [Outgoing(b"a", timestamp=1_700_000_000_000), Outgoing(b"b"),
             Outgoing(b"c", keys=[], properties={}, timestamp=1_700_000_000_005)]
    assert await ms.append_batch("t", 0, batch) == range(3)
    got = await ms.get("t", 0, 0, max_count=5)
    assert [m.body for m in got] == [b"a", b"b", b"c"]
    assert got[0].store_timestamp == 1_700_000_000_000
    assert got[2].store_timestamp == 1_700_000_000_005
    assert got[1].store_timestamp > 1_700_000_000_005  # the store's clock
    assert [(m.keys, m.tags, dict(m.properties)) for m in got] == [((), None, {})] * 3
    await ms.flush()
    assert await ms.offset_for_time("t", 0, 1_700_000_000_001) == 1
    await ms.close()
