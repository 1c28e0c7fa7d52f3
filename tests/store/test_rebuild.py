"""The bucket alone is enough: a queue whose heads are lost or damaged is rebuilt."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.store.conftest import Opener, small_config
from tieredstore.metadata import QueueMetadata, QueuePath
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.store import AsyncMessageStore, metadata_root
from tieredstore.testing import ForwardingObjectStore

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

    with caplog.at_level(logging.WARNING, logger="tieredstore.store.write.queue"):
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


class _Listings(ForwardingObjectStore):
    """Records the prefix of every LIST."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.listed: list[str] = []

    async def _forward(self, op: str, key: str, call: Any, *, bytes_up: int = 0) -> Any:
        if op.startswith("list"):
            self.listed.append(key)
        return await call()


async def test_a_young_queue_is_rebuilt_once_in_its_life() -> None:
    """A queue with no segment record yet is rebuilt (its directories listed) at
    its first open only: that head write sets ``rebuilt``, later heads carry it,
    and reopens list none of its segment directories but the active ones'.
    Heads without ``rebuilt`` (written before it existed) rebuild once more."""
    bucket = MemoryObjectStore()
    config = small_config(write_mode="direct")

    async def reopen(**kw: Any) -> tuple[AsyncMessageStore, _Listings]:
        watched = _Listings(bucket)
        return await AsyncMessageStore.open(config, store=watched, **kw), watched

    store, _ = await reopen()
    await store.append_batch("young", 0, [b"a", b"b"])
    await store.close()
    meta = await QueueMetadata.open_read_only(bucket, QueuePath(metadata_root(config),
                                                                "young", 0))
    assert meta.properties.get("rebuilt") == "1"

    store, watched = await reopen()
    assert [m.body for m in await store.get("young", 0, 0, max_count=5)] == [b"a", b"b"]
    await store.append("young", 0, b"c")
    await store.close()
    assert not [k for k in watched.listed if "/index/" in k], watched.listed  # no rebuild
    meta = await QueueMetadata.open_read_only(bucket, QueuePath(metadata_root(config),
                                                                "young", 0))
    assert meta.properties.get("rebuilt") == "1"  # carried on by the later heads

    writer = await QueueMetadata.open(bucket, QueuePath(metadata_root(config), "young", 0),
                                      writer_id="older format", claim=True)
    await writer.set_properties(rebuilt=None)  # a head as written before the property
    store, watched = await reopen()
    assert [m.body for m in await store.get("young", 0, 0, max_count=5)] == [b"a", b"b", b"c"]
    await store.close()
    assert [k for k in watched.listed if "/index/" in k]  # rebuilt: every directory listed
    meta = await QueueMetadata.open_read_only(bucket, QueuePath(metadata_root(config),
                                                                "young", 0))
    assert meta.properties.get("rebuilt") == "1"
