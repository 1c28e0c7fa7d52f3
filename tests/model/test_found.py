"""What the model tests found, each as a minimal deterministic reproduction.

Marked ``xfail(strict=True)``: they fail today; when one passes, the marker
goes and the test stays.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.model.test_store_model import T0, config
from tests.store.conftest import KiB, small_config
from tieredstore.config import TieredStoreConfig
from tieredstore.errors import SegmentFenced
from tieredstore.fetcher import DiskTier, Fetcher
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import MemoryObjectStore
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import ForwardingObjectStore

FENCED = (SegmentFenced, MetadataFenced)


# Was: fencing was per queue; a replaced writer that appended to a queue it never
# held (created by its successor) opened and claimed it, and fenced the successor
# there. Now every store open registers among the broker's writers, and a store
# that is no longer the newest opens no queue it does not hold.
async def test_a_replaced_writer_cannot_take_a_queue_back() -> None:
    bucket = MemoryObjectStore()
    old = await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                       writer_id="old")
    await old.append("ta", 0, b"a", timestamp=T0)
    await old.flush()
    new = await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                       writer_id="new")
    assert await new.append("tb", 0, b"new-0", timestamp=T0) == 0  # a queue the old never held
    await new.flush()
    try:
        # The old writer was replaced: this should be refused as fenced...
        with contextlib.suppress(*FENCED):
            await old.append("tb", 0, b"old-1", timestamp=T0)
            await old.flush()
        # ...and must not take the queue from the writer that replaced it.
        assert await new.append("tb", 0, b"new-1", timestamp=T0) >= 1
        await new.flush()
    finally:
        for store in (old, new):
            with contextlib.suppress(*FENCED):
                await store.close()
        await bucket.close()



# --- retention under a replaced writer ------------------------------------------------
#
# The replaced writer's active commit-log segment is sealed and recorded by its
# successor (a roll), then expired by retention. The replaced writer still holds
# the segment open. Was: destroy_segment deleted every object of it, the
# successor's fence entry too, so the replaced writer's next create at the
# fenced entry id found it free. Retention now keeps the zero-byte entries.


async def _expire_under_a_replaced_writer() -> tuple[MemoryObjectStore, AsyncMessageStore,
                                                     AsyncMessageStore]:
    bucket = MemoryObjectStore()
    old = await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                       writer_id="old")
    await old.append("ta", 0, b"a", timestamp=T0)
    await old.flush()
    new = await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                       writer_id="new")
    assert await new.append("ta", 0, b"b", timestamp=T0 + 5000) == 1  # rolls: seals seg 0
    await new.flush()
    assert await new.delete_expired(now=(T0 + 5000) / 1000) == 2  # its CL and CQ segments
    assert await new.min_offset("ta", 0) == 1
    return bucket, old, new


async def _close_quietly(*stores: AsyncMessageStore) -> None:
    for store in stores:
        with contextlib.suppress(*FENCED):
            await store.close()


async def test_a_replaced_writer_is_fenced_after_retention() -> None:
    bucket, old, new = await _expire_under_a_replaced_writer()
    try:
        try:
            await old.append("ta", 0, b"c", timestamp=T0 + 1000)  # no roll: same segment
            await old.flush()
        except FENCED:
            return
        raise AssertionError("the replaced writer's flush returned")
    finally:
        await _close_quietly(old, new)
        await bucket.close()


async def test_a_replaced_writers_roll_after_retention_leaves_the_queue_readable() -> None:
    bucket, old, new = await _expire_under_a_replaced_writer()
    with pytest.raises(FENCED):
        await old.append("ta", 0, b"c", timestamp=T0 + 6000)  # rolls its segment 0
        await old.flush()
    await _close_quietly(old, new)
    again = await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                         writer_id="again")
    try:
        assert again.corrupt == {}
        assert [m.body for m in await again.get("ta", 0, 1)] == [b"b"]
    finally:
        await again.close()
        await bucket.close()

# --- the fetcher's disk tier and forget() -----------------------------------------------

PATH = SegmentPath("c", "b", "t", 0, FileType.COMMIT_LOG, 0)
OPTIONS = SegmentOptions(chunk_size=64)


class SlowDisk(DiskTier):
    """A disk tier whose writes take a moment (as real disks' do), so that the
    write of a unit just loaded is still under way when its segment is forgotten."""

    async def put(self, key: str, data: bytes, crc: int, *, tag: str,
                  still_wanted: Callable[[], bool] = lambda: True) -> bool:
        await asyncio.sleep(0.05)
        return await super().put(key, data, crc, tag=tag, still_wanted=still_wanted)


@pytest.fixture
async def slow_disk_fetcher(tmp_path: Path) -> AsyncIterator[tuple[MemoryObjectStore, Fetcher]]:
    bucket = MemoryObjectStore()
    fetcher = Fetcher(bucket, memory_bytes=1024, disk=SlowDisk(tmp_path / "cache", 1 << 20))
    yield bucket, fetcher
    await fetcher.close()
    await bucket.close()


async def test_forget_leaves_nothing_of_the_segment_on_disk(
    slow_disk_fetcher: tuple[MemoryObjectStore, Fetcher],
) -> None:
    bucket, fetcher = slow_disk_fetcher
    writer = await ChunkedSegment.open(bucket, PATH, options=OPTIONS)
    await writer.commit0(0, b"A" * 64)
    assert await fetcher.read(PATH, writer.layout, 0, 64) == b"A" * 64
    await writer.destroy()
    fetcher.forget(PATH)  # the segment is gone: drop what is held for it
    await fetcher.wait_idle()
    assert fetcher.disk is not None
    assert await fetcher.disk.evict(PATH.base_dir) == 0, "forget left entries on disk"


async def test_a_segment_written_again_never_reads_the_old_bytes(
    slow_disk_fetcher: tuple[MemoryObjectStore, Fetcher],
) -> None:
    bucket, fetcher = slow_disk_fetcher
    writer = await ChunkedSegment.open(bucket, PATH, options=OPTIONS, reader=fetcher)
    await writer.commit0(0, b"A" * 64)
    fetcher.forget(PATH)  # out of memory: the next read loads the unit
    assert await writer.read0(0, 64) == b"A" * 64
    await writer.destroy()  # tells the fetcher
    await fetcher.wait_idle()
    writer = await ChunkedSegment.open(bucket, PATH, options=OPTIONS)
    await writer.commit0(0, b"B" * 64)
    reader = await ChunkedSegment.open(bucket, PATH, repair=False, reader=fetcher)
    assert await reader.read0(0, 64) == b"B" * 64


# Was: a writer that opened a queue whose every consume-queue unit had expired
# (retention took the consume-queue segment, while the commit-log segment with
# its last records had a newer message and stayed) re-dispatched from the first
# live commit-log byte and met a record already dispatched: the queue was
# declared corrupt and the messages the old writer had made durable were lost
# to it (and verify reported the same healthy bucket as damaged).
async def test_records_whose_units_expired_are_passed_over_by_recovery_and_verify() -> None:
    from tests.model.test_store_model import TICK, make_body
    from tieredstore.store import verify_store

    bucket = MemoryObjectStore()
    opened = 0

    async def writer() -> AsyncMessageStore:
        nonlocal opened
        opened += 1
        return await AsyncMessageStore.open(config(), store=ForwardingObjectStore(bucket),
                                            writer_id=f"writer-{opened}")

    first = await writer()
    bodies = [make_body(i, (2604 * (i + 1)) % 3001) for i in range(8)]
    for i, body in enumerate(bodies):
        assert await first.append("ta", 0, body, timestamp=T0 + (i + 1) * TICK) == i
    await first.delete_expired(now=(T0 + 5 * TICK) / 1000)
    min_offset, durable = await first.min_offset("ta", 0), await first.commit_offset("ta", 0)
    assert (min_offset, durable) == (4, 7)  # units 0-3 expired; 4-6 durable in the log only
    report = await verify_store(bucket, config())
    assert [e for c in report.queues for e in c.errors] == []
    assert report.queues[0].undispatched == durable - min_offset

    second = await writer()  # replaces the first, which made offsets 4-6 durable
    try:
        assert await second.max_offset("ta", 0) == durable
        got = await second.get("ta", 0, min_offset, max_count=100)
        assert [(m.offset, m.body) for m in got] == [
            (i, bodies[i]) for i in range(min_offset, durable)]
    finally:
        with contextlib.suppress(*FENCED):
            await first.close()
        await second.close()
        await bucket.close()


# --- lost heads after retention -------------------------------------------------------
#
# Was (cross model, seed 2811): retention deleted every sealed segment of a
# queue's files, so the bucket held, per file, a directory of zero-byte entries
# (kept on purpose, see docs/chunks.md "Chunk series") and the active segment.
# When the heads were lost, the rebuild found no sealed segment to record, took
# the leftover directory for an unsealed segment before a later one, and the
# next owner opened every file at base 0: the messages past the deleted
# segments were invisible and the key index was declared corrupt (its next
# segment "already had entries").


def _rolling_config(mode: str) -> TieredStoreConfig:
    """1 KiB consume-queue and key-index segments (32 units or entries), 8 KiB
    commit-log segments: every file rolls within the first 33 messages."""
    return small_config(
        chunk_size=1 * KiB, commit_log_max_size=8 * KiB, consume_queue_max_size=1 * KiB,
        index_max_size=1 * KiB, log_object_size=1 * KiB, rolling_interval=0.0,
        group_commit_interval=3600.0, gc_interval=0.0, retention_interval=0.0,
        file_reserved_time=0.0, write_mode=mode)


@pytest.mark.parametrize("first_mode", ["log", "direct"])
@pytest.mark.parametrize("then_mode", ["direct", "log"])
@pytest.mark.parametrize("more", [5, 0])  # messages the take-over appends
async def test_lost_heads_after_retention_deleted_every_sealed_segment(
        first_mode: str, then_mode: str, more: int) -> None:
    bucket = MemoryObjectStore()
    opened = 0

    async def owner(mode: str) -> AsyncMessageStore:
        nonlocal opened
        opened += 1
        return await AsyncMessageStore.open(_rolling_config(mode),
                                            store=ForwardingObjectStore(bucket),
                                            writer_id=f"owner-{opened}")

    def body(i: int) -> bytes:
        return bytes([i]) * 300  # 27 records fill an 8 KiB commit-log segment

    first = await owner(first_mode)
    old, new = T0, T0 + 10_000
    for i in range(40):  # offsets 0-31 old (the first consume-queue segment), 32-39 new
        assert await first.append("ta", 0, body(i), keys=(f"k{i % 3}",),
                                  timestamp=old if i < 32 else new) == i
    await first.flush()
    assert await first.delete_expired(now=new / 1000) >= 3  # CL, CQ and index at base 0
    assert await first.min_offset("ta", 0) == 32
    second = await owner(then_mode)  # takes the queue over
    for i in range(40, 40 + more):
        assert await second.append("ta", 0, body(i), keys=(f"k{i % 3}",), timestamp=new) == i
    await second.flush()
    with contextlib.suppress(*FENCED):
        await first.close()
    await second.close()
    heads = [o.key for o in await bucket.list_all("") if "/meta/heads/ta/0/" in o.key]
    assert heads
    await bucket.delete_many(heads)

    third = await owner(then_mode)  # rebuilds ta/0 from the bucket
    end = 40 + more
    try:
        assert (await third.min_offset("ta", 0), await third.max_offset("ta", 0)) == (32, end)
        got = await third.get("ta", 0, 32, max_count=100)
        assert [(m.offset, m.body) for m in got] == [(i, body(i)) for i in range(32, end)]
        assert third.corrupt == {}
        assert await third.append("ta", 0, body(end), keys=("k0",), timestamp=new) == end
        await third.flush()
        found = await third.query_by_key("ta", "k0", begin_ms=new)
        assert [m.offset for m in found] == [i for i in range(32, end) if i % 3 == 0] + [end]
    finally:
        await third.close()
    fourth = await owner(first_mode)  # and the rebuilt metadata holds on the next open
    try:
        assert (await fourth.min_offset("ta", 0), await fourth.max_offset("ta", 0)) \
            == (32, end + 1)
        assert fourth.corrupt == {}
    finally:
        await fourth.close()
        await bucket.close()


# --- lost heads after a takeover cut a record short -------------------------------------
#
# Was (found driving the cross model's rules towards lost heads, issue 39 #8): a
# replaced owner's first record of a commit-log segment was cut short (its first
# two chunks landed, the rest never did); its successor went on past them (dead
# space, clean_from). When the heads were lost, the rebuild took the first
# message of a segment from the record at its start, found none there, adopted
# neither that segment nor any after it, and the next owner opened the queue
# corrupt ("the consume queue points ... past the commit log's end"); with
# retention past the segment before, the commit log began at the consume
# queue's end instead (min_offset wrong).


@pytest.mark.parametrize("first_mode", ["log", "direct"])
@pytest.mark.parametrize("then_mode", ["direct", "log"])
@pytest.mark.parametrize("expire", [False, True])
async def test_lost_heads_after_a_takeover_cut_a_segments_first_record_short(
        first_mode: str, then_mode: str, expire: bool) -> None:
    bucket = MemoryObjectStore()
    opened = 0

    async def owner(mode: str) -> AsyncMessageStore:
        nonlocal opened
        opened += 1
        return await AsyncMessageStore.open(_rolling_config(mode),
                                            store=ForwardingObjectStore(bucket),
                                            writer_id=f"owner-{opened}")

    def body(i: int) -> bytes:
        return bytes([i]) * 300  # 24 records fill an 8 KiB commit-log segment

    old, new = T0, T0 + 10_000
    first = await owner(first_mode)
    for i in range(20):  # 6.6 KiB
        assert await first.append("ta", 0, body(i), keys=(f"k{i % 3}",), timestamp=old) == i
    await first.flush()
    # Rolls the commit log: the first record of its next segment, whose first 2 KiB
    # land and the rest never does.
    assert await first.append("ta", 0, b"x" * 2500, timestamp=old) == 20
    await first.wait_idle()  # its full chunks are due: they land
    second = await owner(then_mode)  # takes the queue over: [0, 2048) is dead space there
    assert await second.max_offset("ta", 0) == 20
    end = 40 if expire else 60  # 60: the second's records roll the commit log again
    for i in range(20, end):
        assert await second.append("ta", 0, body(i), keys=(f"k{i % 3}",),
                                   timestamp=old if i < 32 else new) == i
    await second.flush()
    start = 0
    if expire:  # every file's first segment (offsets 0-31): the commit log's active
        # one, which begins with dead space, is all that is left of it
        assert await second.delete_expired(now=new / 1000) == 3
        start = 32
    assert await second.min_offset("ta", 0) == start
    with contextlib.suppress(*FENCED):
        await first.close()
    await second.close()
    await bucket.delete_many([o.key for o in await bucket.list_all("")
                              if "/meta/heads/ta/0/" in o.key])

    third = await owner(then_mode)  # rebuilds ta/0 from the bucket
    try:
        assert third.corrupt == {}
        assert (await third.min_offset("ta", 0), await third.max_offset("ta", 0)) == (start, end)
        got = await third.get("ta", 0, start, max_count=100)
        assert [(m.offset, m.body) for m in got] == [(i, body(i)) for i in range(start, end)]
        for i in range(end, end + 30):  # a roll of every file after the rebuild
            assert await third.append("ta", 0, body(i), keys=(f"k{i % 3}",), timestamp=new) == i
        await third.flush()
        found = await third.query_by_key("ta", "k0", begin_ms=new)
        assert [m.offset for m in found] == [i for i in range(32, end + 30) if i % 3 == 0]
    finally:
        await third.close()
    fourth = await owner(first_mode)  # and the rebuilt metadata holds on the next open
    try:
        assert fourth.corrupt == {}
        assert (await fourth.min_offset("ta", 0), await fourth.max_offset("ta", 0)) \
            == (start, end + 30)
    finally:
        await fourth.close()
        await bucket.close()


# Was (the cross model's "take over mid-record"): when the dead space a replaced
# owner's cut record left at the start of a commit-log segment left no room for
# the next owner's first record there, that owner rolled a segment holding no
# message ("sealed segment ... holds no message"): the queue was corrupt, on a
# plain takeover. A segment now rolls only once it holds a message.
@pytest.mark.parametrize("first_mode", ["log", "direct"])
@pytest.mark.parametrize("then_mode", ["direct", "log"])
async def test_a_takeover_writes_on_after_a_cut_record_filled_most_of_a_segment(
        first_mode: str, then_mode: str) -> None:
    bucket = MemoryObjectStore()
    opened = 0

    async def owner(mode: str) -> AsyncMessageStore:
        nonlocal opened
        opened += 1
        return await AsyncMessageStore.open(_rolling_config(mode),
                                            store=ForwardingObjectStore(bucket),
                                            writer_id=f"owner-{opened}")

    first = await owner(first_mode)
    assert await first.append("ta", 0, b"a" * 7000, timestamp=T0) == 0
    await first.flush()
    # Rolls the commit log: 6 KiB of it land (full chunks), the rest never does.
    assert await first.append("ta", 0, b"b" * 7000, timestamp=T0) == 1
    await first.wait_idle()
    second = await owner(then_mode)
    bodies = [bytes([i]) * 3000 for i in range(5)]  # the first does not fit after 6 KiB
    try:
        assert await second.max_offset("ta", 0) == 1
        for i, body in enumerate(bodies, start=1):
            assert await second.append("ta", 0, body, timestamp=T0) == i
        await second.flush()
        assert second.corrupt == {}
    finally:
        with contextlib.suppress(*FENCED):
            await first.close()
        await second.close()
    third = await owner(first_mode)
    try:
        assert third.corrupt == {}
        got = await third.get("ta", 0, 0, max_count=10)
        assert [m.body for m in got] == [b"a" * 7000, *bodies]
    finally:
        await third.close()
        await bucket.close()
