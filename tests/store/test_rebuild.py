"""The bucket alone is enough: a queue whose heads are lost or damaged is rebuilt."""

from __future__ import annotations

import logging

import pytest

from tests.store.conftest import Opener
from tieredstore.objectstore import ObjectStore
from tieredstore.store import AsyncMessageStore

QUEUES = (("orders", 0), ("orders", 1), ("audit", 3))


def body(topic: str, queue: int, offset: int) -> bytes:
    return f"{topic}/{queue}/{offset}:".encode() * (1 + offset % 37)


async def produce(store: AsyncMessageStore, counts: dict[tuple[str, int], int],
                  per_queue: int) -> None:
    for i in range(per_queue):
        for topic, queue in QUEUES:
            offset = counts.get((topic, queue), 0)
            got = await store.append(topic, queue, body(topic, queue, offset),
                                     timestamp=1_700_000_000_000 + offset * 1000)
            assert got == offset
            counts[(topic, queue)] = offset + 1
        if i % 50 == 0:
            await store.flush()
    await store.flush()


async def assert_everything_reads_back(store: AsyncMessageStore,
                                       counts: dict[tuple[str, int], int]) -> None:
    for (topic, queue), count in counts.items():
        assert await store.min_offset(topic, queue) == 0
        assert await store.max_offset(topic, queue) == count
        offset = 0
        while offset < count:
            got = await store.get(topic, queue, offset, max_count=100)
            assert [m.offset for m in got] == list(range(offset, offset + len(got)))
            for m in got:
                assert m.body == body(topic, queue, m.offset), (topic, queue, m.offset)
                assert m.store_timestamp == 1_700_000_000_000 + m.offset * 1000
            offset += len(got)
        ts = await store.offset_for_time(topic, queue, 1_700_000_000_000 + (count // 2) * 1000)
        assert ts == count // 2


async def heads(backend: ObjectStore) -> list[str]:
    return [o.key for o in await backend.list_all("") if "/heads/" in o.key
            or o.key.rsplit("/", 1)[-1].startswith("head-")]


async def test_delete_every_head_then_reopen(open_store: Opener, backend: ObjectStore,
                                             caplog: pytest.LogCaptureFixture) -> None:
    store = await open_store()
    counts: dict[tuple[str, int], int] = {}
    await produce(store, counts, 300)
    await store.close()
    gone = await heads(backend)
    assert gone, "no head found to delete"
    await backend.delete_many(gone)

    with caplog.at_level(logging.WARNING, logger="tieredstore.store.queue"):
        again = await open_store()
        # get, before any append, finds the queue and rebuilds it
        await assert_everything_reads_back(again, counts)
    assert "rebuilt" in caplog.text
    await produce(again, counts, 40)  # the producer goes on at the right offsets
    await again.close()
    third = await open_store()
    await assert_everything_reads_back(third, counts)
    await third.close()


async def test_every_head_damaged_then_reopen(open_store: Opener,
                                              backend: ObjectStore) -> None:
    store = await open_store()
    counts: dict[tuple[str, int], int] = {}
    await produce(store, counts, 200)
    await store.close()
    for key in await heads(backend):
        data = bytearray(await backend.get(key))
        data[-1] ^= 0xFF
        await backend.put(key, bytes(data))
    again = await open_store()
    assert again.corrupt == {}
    await assert_everything_reads_back(again, counts)
    await produce(again, counts, 20)
    await again.close()
    third = await open_store()
    await assert_everything_reads_back(third, counts)
    await third.close()


async def test_an_unknown_queue_is_still_no_such_queue(open_store: Opener) -> None:
    store = await open_store()
    with pytest.raises(Exception, match="no such queue"):
        await store.get("nothing", 0, 0)
    await store.close()


async def test_lost_heads_after_retention_trimmed_every_sealed_segment_keep_the_trimmed_min(
        open_store: Opener, backend: ObjectStore) -> None:
    """Write mode log: retention deleted the sealed consume-queue segments (their
    pieces may stay in log objects, kept by a long ``gc_safety_age``), then the
    heads are lost. The rebuild neither brings the trimmed segments back nor opens
    the consume queue at 0: the min offset stays, every message after it reads,
    and appends go on."""
    t0, day = 1_700_000_000_000, 24 * 3600
    store = await open_store(write_mode="log", gc_safety_age=30 * day)
    for offset in range(70):  # 64 units fill a consume-queue segment: it rolls
        old = offset < 64
        ts = t0 + offset if old else t0 + 10 * day * 1000 + offset
        assert await store.append("orders", 0, body("orders", 0, offset), timestamp=ts) == offset
        await store.flush()
    assert await store.delete_expired(now=t0 / 1000 + 10 * day) >= 1
    assert await store.min_offset("orders", 0) == 64
    await store.close()
    await backend.delete_many(await heads(backend))

    for _ in range(2):  # the rebuild's open, then a plain reopen of what it wrote
        store = await open_store(write_mode="log", gc_safety_age=30 * day)
        assert await store.min_offset("orders", 0) == 64
        count = await store.max_offset("orders", 0)
        got = await store.get("orders", 0, 64, max_count=100)
        assert [m.offset for m in got] == list(range(64, count))
        assert all(m.body == body("orders", 0, m.offset) for m in got)
        assert await store.append("orders", 0, body("orders", 0, count),
                                   timestamp=t0 + 10 * day * 1000 + count) == count
        await store.flush()
        assert not store.corrupt
        await store.close()
