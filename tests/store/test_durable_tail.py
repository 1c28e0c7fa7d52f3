"""Durable means readable without a writer: a read-only view reads the commit
log's records past the consume queue's end (docs/reading.md, "The durable tail")."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.store.conftest import KiB, small_config
from tests.store.tail_writer import QUEUE, TOPIC, WRITER, body, config, run_and_kill
from tieredstore.config import TieredStoreConfig
from tieredstore.objectstore import (
    ByteRange,
    LocalObjectStore,
    MemoryObjectStore,
    ObjectData,
    ObjectStore,
)
from tieredstore.segment import DirectReader
from tieredstore.spark.read.plan import NO_END, plan_read
from tieredstore.spark.read.selection import Selection
from tieredstore.store import (
    UNIT_SIZE,
    AsyncMessageStore,
    DurableTail,
    QueueView,
    ReadOnlyCluster,
    ReadOnlyMessageStore,
    scan_planned,
    verify_queue,
)
from tieredstore.testing import ForwardingObjectStore


async def test_a_sigkilled_writers_commit_offset_is_readable_without_a_writer(
        tmp_path: Path) -> None:
    root = tmp_path / "data"
    said = run_and_kill(root)
    assert said and said[-1] > 0, f"the writer printed no commit offset: {said}"
    committed = said[-1]
    async with await ReadOnlyMessageStore.open(config(str(root), **WRITER)) as reader:
        view = await reader.queue(TOPIC, QUEUE)
        units = view.cq.end // UNIT_SIZE
        # The consume queue ends before commit_offset: the rest is the commit log's tail.
        assert units < committed, f"consume queue {units}, commit_offset {committed}"
        top = await reader.max_offset(TOPIC, QUEUE)
        assert top >= committed, f"read-only max {top}, commit_offset {committed}"
        offset = 0
        while offset < committed:
            for m in await reader.get(TOPIC, QUEUE, offset, max_count=1000):
                assert (m.offset, m.body) == (offset, body(offset)), f"offset {offset}"
                offset += 1
    async with await ReadOnlyCluster.open(config(str(root), **WRITER)) as cluster:
        broker = cluster.broker(cluster.config.broker)
        assert await broker.max_offset(TOPIC, QUEUE) == top
    # verify walks the same tail: every record past the units checked, none wrong.
    store = LocalObjectStore(root, fsync=False)
    try:
        check = await verify_queue(store, config(str(root), **WRITER), TOPIC, QUEUE)
    finally:
        await store.close()
    assert check.errors == [], check.errors
    assert (check.max_offset, check.messages + check.undispatched) == (units, top)


T0 = 1_700_000_000_000


async def _settled(read: Callable[[], Awaitable[int]]) -> int:
    """``read()`` once it stopped changing for a few group commits."""
    last, same = -1, 0
    while same < 10:
        await asyncio.sleep(0.02)
        got = await read()
        last, same = got, same + 1 if got == last else 0
    return last


async def test_a_view_reads_to_the_writers_commit_offset_while_the_consume_queue_trails(
        ) -> None:
    """A live writer whose records landed and whose units wait (``chunk_wait``):
    a read-only view's max_offset is the writer's commit_offset, and its gets,
    tag filters, time look-ups and key queries find the records past the units."""
    backend = MemoryObjectStore()
    cfg = small_config(write_mode="log", chunk_size=4 * KiB, direct_commit_size=4 * KiB,
                       chunk_wait=60.0, consume_queue_max_size=64 * KiB,
                       index_max_size=64 * KiB, gc_interval=0, retention_interval=0)
    writer = await AsyncMessageStore.open(cfg, store=backend)
    try:
        count = 300
        for i in range(count):
            await writer.append(TOPIC, QUEUE, b"m%d-" % i + bytes(100), tags="odd" if i % 2
                                else "even", keys=[f"k{i}"], timestamp=T0 + i)
        # Idle now: the last records, short of a chunk, wait out chunk_wait.
        committed = await _settled(lambda: writer.commit_offset(TOPIC, QUEUE))
        async with await ReadOnlyMessageStore.open(cfg, store=backend) as reader:
            view = await reader.queue(TOPIC, QUEUE)
            units = view.cq.end // UNIT_SIZE
            assert units < committed, f"the consume queue holds {units} of {committed}"
            assert await reader.max_offset(TOPIC, QUEUE) == committed
            tail = range(units, committed)
            got = await reader.get(TOPIC, QUEUE, units, max_count=count)
            assert [(m.offset, m.body) for m in got] == [(i, b"m%d-" % i + bytes(100))
                                                         for i in tail]
            odd = await reader.get_by_tags(TOPIC, QUEUE, units, "odd", max_count=count)
            assert [m.offset for m in odd.messages] == [i for i in tail if i % 2]
            last = committed - 1
            assert await reader.offset_for_time(TOPIC, QUEUE, T0 + last) == last
            assert [m.offset for m in await reader.query_by_key(TOPIC, f"k{last}")] == [last]
            assert await writer.commit_offset(TOPIC, QUEUE) == committed
        # Spark's planned read: the active slice goes on with the tail.
        assert await _planned_offsets(backend, cfg) == list(range(committed))
    finally:
        await writer.close()


async def _planned_offsets(backend: ObjectStore, cfg: TieredStoreConfig) -> list[int]:
    """Every offset a Spark read of the store plans and reads (its slices, as its
    tasks scan them)."""
    found: list[int] = []
    for part in await plan_read(backend, cfg, Selection()):
        first = max(part.first_offset, part.cq_base // UNIT_SIZE)
        end = None if part.last_offset == NO_END else part.last_offset + 1
        async for batch in scan_planned(cfg, part.topic, part.queue_id, first=first, end=end,
                                        cq_segments=((part.cq_base, part.cq_size),),
                                        cl_segments=part.cl_segments,
                                        log_pieces=part.log_pieces,
                                        on=(backend, DirectReader(backend))):
            assert batch.columns is not None
            found += batch.columns.offsets().tolist()
    return found


class CountedReads(ForwardingObjectStore):
    """Counts the bytes its GETs return."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.bytes_read = 0

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        got: ObjectData = await super().get_object(key, byte_range)
        self.bytes_read += len(got.data)
        return got


async def test_a_view_opened_again_walks_only_the_new_part_of_the_tail() -> None:
    """A view given the tail a view before it walked (a streaming query's next
    batch) reads only the records past it, and holds what a fresh view holds;
    once the units landed (another start) it walks afresh."""
    backend = MemoryObjectStore()
    cfg = small_config(write_mode="log", chunk_size=8 * KiB, direct_commit_size=8 * KiB,
                       chunk_wait=60.0, consume_queue_max_size=64 * KiB, gc_interval=0,
                       retention_interval=0)
    writer = await AsyncMessageStore.open(cfg, store=backend)

    async def view(after: DurableTail | None = None) -> tuple[QueueView, int]:
        counted = CountedReads(backend)
        opened = await QueueView.open(counted, cfg, TOPIC, QUEUE, tail_after=after)
        return opened, counted.bytes_read

    try:
        for i in range(150):
            await writer.append(TOPIC, QUEUE, bytes([i]) * 1000, keys=[f"k{i}"])
            if i == 99:
                await _settled(lambda: writer.commit_offset(TOPIC, QUEUE))
                first, _ = await view()
        committed = await _settled(lambda: writer.commit_offset(TOPIC, QUEUE))
        assert first.durable_tail.end_offset >= 90, first.durable_tail.end_offset
        again, read_again = await view(first.durable_tail)
        fresh, read_fresh = await view()
        assert again.max_offset == fresh.max_offset == committed
        assert (again.durable_tail.first, again.durable_tail.units, again.durable_tail.keyed) \
            == (fresh.durable_tail.first, fresh.durable_tail.units, fresh.durable_tail.keyed)
        walked_before = first.durable_tail.end_position - first.durable_tail.start.position \
            if first.durable_tail.start is not None else 0
        assert read_again <= read_fresh - walked_before * 9 // 10, \
            (read_again, read_fresh, walked_before)
        await writer.flush()  # the units land: the tail starts elsewhere, walked afresh
        landed, _ = await view(again.durable_tail)
        assert landed.max_offset == await writer.commit_offset(TOPIC, QUEUE) == 150
        assert landed.durable_tail.units == (await view())[0].durable_tail.units
    finally:
        await writer.close()
