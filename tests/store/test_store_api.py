"""The message store's API on memory, a local directory and moto."""

from __future__ import annotations

import asyncio
import contextlib
import logging

import pytest

from tests.store.conftest import KiB, Opener, small_config
from tests.store.test_rebuild import heads
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import Fenced, InvalidName
from tieredstore.metadata import SegmentRecord
from tieredstore.objectstore import MemoryObjectStore, ObjectStore
from tieredstore.objectstore.base import ByteRange, ObjectData
from tieredstore.segment import FileType
from tieredstore.store import (
    AsyncMessageStore,
    MessageStore,
    MessageTooLarge,
    OffsetError,
    OffsetOutOfRange,
    open_metadata,
)
from tieredstore.testing import ForwardingObjectStore


def body(i: int) -> bytes:
    return f"message-{i:05d}-".encode() * (1 + i % 7)


async def sealed_records(backend: ObjectStore, config: TieredStoreConfig, topic: str,
                         queue_id: int, file_type: FileType) -> list[SegmentRecord]:
    """The sealed segments the queue's metadata in the bucket records."""
    meta = await open_metadata(backend, config, topic, queue_id)
    return [r async for r in meta.records(file_type)]


async def test_append_get_round_trip_with_keys_tags_properties(open_store: Opener) -> None:
    ms = await open_store()
    for i in range(50):
        off = await ms.append("orders", 1, body(i), keys=[f"k{i}"], tags="T" if i % 2 else None,
                              properties={"n": str(i)}, timestamp=1_000 + i)
        assert off == i
    got = await ms.get("orders", 1, 10, max_count=5)
    assert [m.offset for m in got] == [10, 11, 12, 13, 14]
    assert [m.body for m in got] == [body(i) for i in range(10, 15)]
    assert got[1].keys == ("k11",) and got[1].tags == "T" and got[0].tags is None
    assert got[2].properties == {"n": "12"} and got[2].store_timestamp == 1_012
    assert (got[0].topic, got[0].queue_id) == ("orders", 1)
    await ms.close()


async def test_reads_see_unflushed_appends_and_flush_makes_them_durable(
    open_store: Opener,
) -> None:
    ms = await open_store(group_commit_interval=3600)
    for i in range(30):
        await ms.append("t", 0, body(i))
    assert [m.body for m in await ms.get("t", 0, 0, max_count=30)] == [body(i) for i in range(30)]
    assert await ms.commit_offset("t", 0) < 30
    await ms.flush()
    assert await ms.commit_offset("t", 0) == 30
    await ms.close()


async def test_rolling_seals_segments_and_reads_span_them(open_store: Opener,
                                                          backend: ObjectStore) -> None:
    ms = await open_store()
    for i in range(1000):  # ~100 KiB of records: several 32 KiB commit-log segments
        await ms.append("t", 0, body(i))
    await ms.flush()
    await ms.wait_idle()  # background merges
    sealed = await sealed_records(backend, ms.config, "t", 0, FileType.COMMIT_LOG)
    assert len(sealed) >= 2, "commit log did not roll"
    assert len(await sealed_records(backend, ms.config, "t", 0, FileType.CONSUME_QUEUE)) >= 2
    got = []
    offset = 0
    while offset < 1000:
        batch = await ms.get("t", 0, offset, max_count=64)
        got.extend(batch)
        offset += len(batch)
    assert [m.body for m in got] == [body(i) for i in range(1000)]
    await ms.close()


async def test_gets_return_every_record_across_units_and_segments(
        open_store: Opener, backend: ObjectStore) -> None:
    """get reads back-to-back records in runs that end at a unit's end (the
    writer's store and a read-only one); records that cross one (4 KiB chunks,
    records of 30..300 bytes) and segment ends come back whole, in order, from
    sealed segments in chunks and merged."""
    ms = await open_store()
    count = 1500
    for i in range(count):
        await ms.append("t", 0, body(i) * (1 + i % 3))
    await ms.flush()
    expected = [body(i) * (1 + i % 3) for i in range(count)]

    async def read_all(reader: AsyncMessageStore, max_count: int, max_bytes: int
                       ) -> list[bytes]:
        out: list[bytes] = []
        while len(out) < count:
            batch = await reader.get("t", 0, len(out), max_count=max_count, max_bytes=max_bytes)
            assert batch and [m.offset for m in batch] == list(
                range(len(out), len(out) + len(batch)))
            out.extend(m.body for m in batch)
        return out

    cases = ((256, 4 * 1024 * 1024), (7, 1000), (1000, 5000))
    for max_count, max_bytes in cases:
        assert await read_all(ms, max_count, max_bytes) == expected
    async with await AsyncMessageStore.open_read_only(ms.config, store=backend) as reader:
        assert await read_all(reader, 256, 4 * 1024 * 1024) == expected
    await ms.close()  # merges the sealed segments
    again = await open_store()
    for max_count, max_bytes in cases:
        assert await read_all(again, max_count, max_bytes) == expected
        async with await AsyncMessageStore.open_read_only(again.config, store=backend) as reader:
            assert await read_all(reader, max_count, max_bytes) == expected
    await again.close()


async def test_restart_recovers_offsets_and_data(open_store: Opener) -> None:
    ms = await open_store()
    for i in range(300):
        await ms.append("a", 0, body(i))
        await ms.append("b", 2, body(i + 1000))
    await ms.close()
    again = await open_store()
    assert again.queues() == [("a", 0), ("b", 2)]
    assert await again.max_offset("a", 0) == 300 and await again.max_offset("b", 2) == 300
    assert [m.body for m in await again.get("b", 2, 295, max_count=10)] == \
        [body(i + 1000) for i in range(295, 300)]
    assert await again.append("a", 0, b"next") == 300
    assert (await again.get("a", 0, 300))[0].body == b"next"
    await again.close()


async def test_host_assigned_offsets_refuse_gaps_and_rewinds(open_store: Opener) -> None:
    ms = await open_store()
    assert await ms.append("t", 0, b"a", offset=0) == 0
    with pytest.raises(OffsetError, match="gap"):
        await ms.append("t", 0, b"b", offset=5)
    with pytest.raises(OffsetError, match="rewind"):
        await ms.append("t", 0, b"b", offset=0)
    assert await ms.append("t", 0, b"b", offset=1) == 1
    await ms.close()


async def test_bad_input_gets_clear_errors(open_store: Opener) -> None:
    ms = await open_store()
    with pytest.raises(MessageTooLarge, match="limit is 16384"):
        await ms.append("t", 0, b"x" * (16 * 1024 + 1))
    with pytest.raises(InvalidName, match="topic"):
        await ms.append("a/b", 0, b"x")
    with pytest.raises(InvalidName, match="queue_id"):
        await ms.append("t", -1, b"x")
    await ms.append("t", 0, b"x")
    with pytest.raises(OffsetOutOfRange, match=r"outside the queue's offsets \[0, 1\)"):
        await ms.get("t", 0, 2)
    assert await ms.get("t", 0, 1) == []
    with pytest.raises(OffsetOutOfRange, match="no such queue"):
        await ms.get("nope", 0, 0)
    await ms.close()


async def test_max_bytes_limits_a_batch_but_returns_at_least_one(open_store: Opener) -> None:
    ms = await open_store()
    for _ in range(20):
        await ms.append("t", 0, b"y" * 1000)
    assert len(await ms.get("t", 0, 0, max_count=20, max_bytes=3500)) == 3
    assert len(await ms.get("t", 0, 0, max_count=20, max_bytes=10)) == 1
    await ms.close()


async def test_offset_for_time_binary_searches_segments(open_store: Opener) -> None:
    ms = await open_store()
    for i in range(500):
        await ms.append("t", 0, body(i), timestamp=10_000 + 10 * i)
    await ms.flush()
    assert await ms.offset_for_time("t", 0, 0) == 0
    assert await ms.offset_for_time("t", 0, 10_000 + 10 * 123) == 123
    assert await ms.offset_for_time("t", 0, 10_000 + 10 * 123 - 5) == 123
    assert await ms.offset_for_time("t", 0, 10_000 + 10 * 499) == 499
    assert await ms.offset_for_time("t", 0, 99_999_999) == 500
    await ms.close()


async def test_rolling_by_time(open_store: Opener, backend: ObjectStore) -> None:
    ms = await open_store(rolling_interval=1.0)
    for i in range(6):
        await ms.append("t", 0, b"x", timestamp=1_000_000 + i * 600)  # 0.6 s apart
    await ms.flush()
    records = await sealed_records(backend, ms.config, "t", 0, FileType.COMMIT_LOG)
    assert [(r.first_message_offset, r.last_message_offset) for r in records] == [
        (0, 1), (2, 3)]
    await ms.close()


async def test_retention_deletes_old_segments_cq_first_with_topic_override(
    open_store: Opener,
) -> None:
    ms = await open_store()
    ms.topic_reserved_time = {"keep": 10**9}
    for topic in ("old", "keep"):
        for i in range(400):
            await ms.append(topic, 0, body(i), timestamp=1_000 + i)
    await ms.flush()
    await ms.wait_idle()
    deleted = await ms.delete_expired(now=1_000 + 1_000_000)
    assert deleted >= 2
    assert await ms.min_offset("old", 0) > 0
    assert await ms.min_offset("keep", 0) == 0
    first = await ms.min_offset("old", 0)
    with pytest.raises(OffsetOutOfRange):
        await ms.get("old", 0, first - 1)
    assert [m.offset for m in await ms.get("old", 0, first, max_count=3)] == \
        [first, first + 1, first + 2]
    await ms.close()
    again = await open_store()
    assert await again.min_offset("old", 0) == first
    await again.close()


T0 = 1_700_000_000_000  # ms
CUTOFF = T0 + 50_000  # ms: retention's cutoff in the tests below
NEWER = T0 + 100_000  # ms: a stamp after it, on a message among older ones


async def retain_from_cutoff(store: AsyncMessageStore) -> int:
    store.topic_reserved_time = {"t": 0}
    return await store.delete_expired(now=CUTOFF / 1000)


async def test_retention_keeps_a_newer_message_the_sealing_writer_did_not_see(
    open_store: Opener, backend: ObjectStore,
) -> None:
    # Offset 1 is stamped after the cutoff, every other message before it. The
    # writer that seals the consume-queue segment opened after offset 1 was written.
    ms = await open_store()
    for i in range(10):
        await ms.append("t", 0, body(i), timestamp=NEWER if i == 1 else T0 + i)
    await ms.close()
    ms = await open_store()
    for i in range(10, 70):  # 64 units a consume-queue segment: it seals
        await ms.append("t", 0, body(i), timestamp=T0 + i)
    await ms.flush()
    await ms.wait_idle()
    # The seal read the units it took over unseen: its record bounds them all.
    first = (await sealed_records(backend, ms.config, "t", 0, FileType.CONSUME_QUEUE))[0]
    assert (first.min_timestamp_ms, first.end_timestamp_ms) == (T0, NEWER)
    await retain_from_cutoff(ms)
    [kept] = await ms.get("t", 0, 1, max_count=1)
    assert (kept.offset, kept.store_timestamp) == (1, NEWER)
    await ms.close()


async def test_retention_keeps_a_newer_message_of_a_record_rebuilt_after_lost_heads(
    open_store: Opener, backend: ObjectStore,
) -> None:
    ms = await open_store()
    for i in range(70):  # 64 units a consume-queue segment: it seals
        await ms.append("t", 0, body(i), timestamp=NEWER if i == 1 else T0 + i)
    await ms.close()
    await backend.delete_many(await heads(backend))
    ms = await open_store()
    assert await ms.max_offset("t", 0) == 70  # opens the queue: rebuilt from its segments
    await retain_from_cutoff(ms)
    [kept] = await ms.get("t", 0, 1, max_count=1)
    assert (kept.offset, kept.store_timestamp) == (1, NEWER)
    await ms.close()


async def test_second_writer_fences_the_first(open_store: Opener) -> None:
    before = asyncio.all_tasks()
    first = await open_store()
    first_tasks = asyncio.all_tasks() - before  # its periodic passes
    await first.append("t", 0, b"one")
    await first.flush()
    second = await open_store()  # fences the log; claims the queue at its first touch
    assert await second.append("t", 0, b"two") == 1
    await second.flush()
    with pytest.raises(Fenced):
        for _ in range(200):
            await first.append("t", 0, b"x" * 500)
        await first.flush()
        await first.wait_idle()
        raise AssertionError("the first writer was never fenced")
    with contextlib.suppress(Fenced):
        await first.close()  # its flush fails again; its tasks still stop
    assert first_tasks and all(task.done() for task in first_tasks)
    await second.close()


def test_sync_facade_has_the_same_names() -> None:
    store = MemoryObjectStore()
    with MessageStore.open(small_config(), store=store) as ms:
        assert ms.append("t", 0, b"hello", keys=["k"]) == 0
        ms.flush()
        ms.wait_idle()
        assert ms.get("t", 0, 0)[0].body == b"hello"
        assert (ms.min_offset("t", 0), ms.max_offset("t", 0), ms.commit_offset("t", 0)) == \
            (0, 1, 1)
    for name in ("append", "flush", "get", "offset_for_time", "min_offset", "max_offset",
                 "commit_offset", "delete_expired", "wait_idle", "close"):
        assert hasattr(AsyncMessageStore, name) and hasattr(MessageStore, name)


async def test_concurrent_appenders_get_distinct_ordered_offsets(open_store: Opener) -> None:
    ms = await open_store()

    async def producer(n: int) -> list[int]:
        return [await ms.append("t", 0, f"{n}:{i}".encode()) for i in range(50)]

    results = await asyncio.gather(*(producer(n) for n in range(4)))
    assert sorted(o for r in results for o in r) == list(range(200))
    messages = await ms.get("t", 0, 0, max_count=200)
    for n, offsets in enumerate(results):
        assert [messages[o].body for o in offsets] == [f"{n}:{i}".encode() for i in range(50)]
    await ms.close()


async def test_reads_during_background_merges_follow_the_merged_object() -> None:
    """A reader of a just-rolled segment must not see its chunks vanish under it."""
    release = asyncio.Event()

    class HeldMerges(MemoryObjectStore):
        async def complete_multipart(self, *args, **kw):  # type: ignore[no-untyped-def]
            await release.wait()
            return await super().complete_multipart(*args, **kw)

    ms = await AsyncMessageStore.open(small_config(memory_cache_bytes=0), store=HeldMerges())
    for i in range(1500):
        await ms.append("t", 0, body(i))
    await ms.flush()
    expected = [body(i) for i in range(1500)]

    async def read_all() -> list[bytes]:
        out: list[bytes] = []
        while len(out) < 1500:
            out.extend(m.body for m in await ms.get("t", 0, len(out), max_count=37))
        return out

    assert await read_all() == expected  # sealed segments read as chunks, merges held
    release.set()
    await ms.wait_idle()  # merges land and delete the chunks
    assert await read_all() == expected
    await ms.close()


@pytest.mark.parametrize("write_mode", ["direct", "log"])
async def test_a_topic_of_200_utf8_bytes_round_trips_on_every_backend(
        open_store: Opener, backend: ObjectStore, write_mode: str) -> None:
    """The documented name limit (200 bytes of UTF-8) holds on every backend:
    66 CJK characters are 198 bytes, 594 once percent-encoded."""
    topic = "主题" * 33
    assert len(topic.encode()) == 198
    ms = await open_store(write_mode=write_mode, chunk_size=1 * KiB)
    for i in range(40):
        assert await ms.append(topic, 3, body(i), keys=[f"k{i}"], tags="t") == i
    await ms.flush()
    await ms.close()
    assert any(f"/{topic}/3/" in o.key for o in await backend.list_all(""))
    again = await open_store(write_mode=write_mode)
    assert again.queues() == [(topic, 3)]
    got = await again.get(topic, 3, 0, max_count=100)
    assert [m.body for m in got] == [body(i) for i in range(40)]
    assert [m.offset for m in await again.query_by_key(topic, "k7")] == [7]
    await again.close()


class _PageGets(ForwardingObjectStore):
    """Counts the GETs of each metadata page key."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.gets: dict[str, int] = {}

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        if "/pages/" in key:
            self.gets[key] = self.gets.get(key, 0) + 1
        return await super().get_object(key, byte_range)


@pytest.mark.parametrize("write_mode", ["log", "direct"])
async def test_a_clean_reopen_reads_no_page_that_is_not_there_and_warns_of_nothing(
        write_mode: str, caplog: pytest.LogCaptureFixture) -> None:
    """A head whose tail is full (the next roll writes its page) makes the open look
    for the page a crash may have left: one GET that finds none, not a read
    again per 404, each with a warning that a page is missing. A young keyed
    queue (no sealed segment yet) is not taken for one whose heads were lost."""
    backend = MemoryObjectStore()
    config = small_config(gc_interval=0, write_mode=write_mode)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(300):
        await store.append("t", 0, body(i), timestamp=1_700_000_000_000 + i)
    await store.append("young", 0, body(0), keys=["k"])
    await store.close()
    meta = await open_metadata(backend, config, "t", 0)
    full = [s for s in meta.head.files if len(s.tail) == meta.page_size]
    assert full, "no file type with a full tail: the test needs other sizes"
    counting = _PageGets(backend)
    with caplog.at_level(logging.WARNING):
        store = await AsyncMessageStore.open(config, store=counting)
        assert await store.max_offset("t", 0) == 300
        assert len(await store.query_by_key("young", "k")) == 1
        await store.close()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert list(counting.gets.values()) == [1] * len(full), counting.gets
