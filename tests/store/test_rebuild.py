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
