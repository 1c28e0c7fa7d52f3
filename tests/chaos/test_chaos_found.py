"""Library bugs the chaos run found, each reduced to a deterministic reproduction.

Each test states what must hold; each failed before its fix (the comment above
it says how).
The faults are scripted (:mod:`tests.chaos.scripted`): the same
faults the chaos run injects at random, placed on the one request that
matters.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from uuid import UUID

import pytest

from tests.chaos.harness import FENCED, chaos_config
from tests.chaos.scripted import Scripted, flip_bit
from tieredstore.errors import TieredStoreError
from tieredstore.fetcher import Fetcher
from tieredstore.ledger import (
    LocalLedgerStore,
    ManagedLedger,
    ManagedLedgerConfig,
    OffloadOptions,
    SegmentLedgerOffloader,
)
from tieredstore.segment import ChunkedSegment, FileType, SegmentOptions, SegmentPath
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import FaultKind

T, Q = "t", 0


def body(i: int, size: int = 700) -> bytes:
    tag = f"{i:06d}|".encode()
    return (tag * (size // len(tag) + 1))[:size]


async def open_store(bucket: Scripted, **overrides: object) -> AsyncMessageStore:
    """The store opened and its queues claimed (in the background: waited for),
    so that a fault scripted for the open meets the claim's reads."""
    store = await AsyncMessageStore.open(chaos_config(**overrides), store=bucket,
                                         writer_id="repro")
    await store.wait_idle()
    return store


async def fill(bucket: Scripted, count: int, *, size: int = 700, **overrides: object) -> None:
    """``count`` messages, acknowledged, over several rolls; merges done; closed."""
    store = await open_store(bucket, **overrides)
    for i in range(count):
        assert await store.append(T, Q, body(i, size), timestamp=1_000 * (i + 1)) == i
    await store.flush()
    await store.close()


async def read_all(store: AsyncMessageStore) -> list[bytes]:
    out: list[bytes] = []
    offset = await store.min_offset(T, Q)
    end = await store.max_offset(T, Q)
    while offset < end:
        got = await store.get(T, Q, offset, max_count=64)
        assert [m.offset for m in got] == list(range(offset, offset + len(got)))
        out.extend(m.body for m in got)
        offset += len(got)
    return out


# --- 1. a corrupted GET during open marks a queue corrupt -----------------------------


# Was: AsyncMessageStore._recover (tieredstore/store/api/message_store.py, the except
# TieredStoreError branch of one()) files any non-transient error as corruption: the
# IntegrityError of ONE corrupted GET (a flipped bit on the wire, a truncated body) marks the
# queue corrupt for the store's whole life; reads and writes refuse, only a reopen helps. Chaos:
# hit in every default seed, several times.
# In the log mode the open reads the active consume queue's units from log objects.
@pytest.mark.parametrize(("write_mode", "prefix"), [("direct", "/consumequeue/"),
                                                    ("log", "/log/")])
async def test_one_corrupted_read_during_open_does_not_mark_the_queue_corrupt(
        write_mode: str, prefix: str) -> None:
    bucket = Scripted()
    await fill(bucket, 120, write_mode=write_mode)
    bucket.script("get", prefix, FaultKind.FLIP_BITS)  # the next GET there
    store = await open_store(bucket, write_mode=write_mode)
    try:
        assert bucket.log and not bucket.pending
        assert store.corrupt == {}
        assert await read_all(store) == [body(i) for i in range(120)]
        assert await store.append(T, Q, body(120)) == 120
        await store.flush()
    finally:
        with contextlib.suppress(TieredStoreError):
            await store.close()


# Was: MetadataReader._read_page (tieredstore/metadata/reader.py) believed the first damaged
# read of a metadata page: the CorruptMetadata of ONE flipped bit marked the queue corrupt at
# open, or failed a read. Chaos: test_chaos_log seeds 116 and 208 under CPU load (which
# requests meet the faults depends on timing there).
async def test_one_corrupted_read_of_a_metadata_page_does_not_mark_the_queue_corrupt() -> None:
    bucket = Scripted()
    await fill(bucket, 400)
    first_page = "/pages/t/0/commit_log/page-00000000000000000000-"  # stays while the queue does
    assert [o for o in await bucket.list_all("") if first_page in o.key]
    bucket.script("get", first_page, FaultKind.FLIP_BITS)  # its next GET
    store = await open_store(bucket)
    try:
        assert store.corrupt == {}
        assert await read_all(store) == [body(i) for i in range(400)]
        assert bucket.log and not bucket.pending  # the page was read, damaged, once
    finally:
        with contextlib.suppress(TieredStoreError):
            await store.close()


# --- 2. a corrupted GET of the newest head: the opener builds on an older head --------


# Was: VersionedHeads.load (tieredstore/metadata/versions.py) takes a head whose GET failed its
# CRC for damage at rest and silently uses the previous head; the claim then writes head v+1
# from that stale state, so the newest head's change is lost for good. Here a retention trim:
# min_offset goes back to deleted segments and reads fail (QueueCorrupt). With both kept heads
# misread, QueueMetadata.open starts over ('no valid head ... starting over',
# tieredstore/metadata/queue.py) and rebuilds from segments. Chaos: hit in every default seed;
# the seeds that stop, stop on its consequences ('the consume queue points to commit-log byte N,
# past the commit log's end M', 'the next segment already has entries', PageMissing). A checksum
# failure on a GET should be re-read before it is believed.
async def test_one_corrupted_read_of_the_newest_head_loses_no_change() -> None:
    bucket = Scripted()
    store = await open_store(bucket)
    for i in range(200):  # small messages: retention empties a CQ segment, no CL one
        assert await store.append(T, Q, body(i, 100), timestamp=1_000 * (i + 1)) == i
    await store.flush()
    await store.wait_idle()
    assert await store.delete_expired(now=100) == 1  # the newest head is this trim
    assert await store.min_offset(T, Q) == 64
    await store.close()
    bucket.script("get", "/heads/", FaultKind.FLIP_BITS)  # the newest head, once
    store = await open_store(bucket)
    try:
        assert bucket.log and not bucket.pending
        assert await store.min_offset(T, Q) == 64
        assert await read_all(store) == [body(i, 100) for i in range(64, 200)]
    finally:
        await store.close()
    again = await open_store(bucket)  # faults over: the trim must still be there
    try:
        assert await again.min_offset(T, Q) == 64
        assert await read_all(again) == [body(i, 100) for i in range(64, 200)]
    finally:
        await again.close()


# --- 3. a lost reply, then a corrupted GET of the writer's own head: a false fence ----


# Was: VersionedHeads.create (tieredstore/metadata/versions.py): after a lost reply the retried
# create gets 412 and GETs the head to see if it is its own; the bytes are compared raw
# (existing != data) with no CRC check, so a corrupted GET reads as 'written by another writer':
# MetadataFenced for good, the only writer wedged until a reopen. Same code serves the managed
# ledger (ManagedLedgerFenced). Chaos: hit in most default seeds, queues and managed ledger
# alike.
async def test_lost_reply_then_corrupted_read_of_its_own_head_is_not_a_fence() -> None:
    bucket = Scripted()
    store = await open_store(bucket)
    try:
        assert await store.append(T, Q, body(0), timestamp=1_000) == 0  # the queue's claim
        await store.flush()
        bucket.script("put", "/heads/", FaultKind.REPLY_LOST)  # the next head write lands
        bucket.flip("/heads/", flip_bit(-1))  # ...and the GET that checks it is damaged
        for i in range(1, 80):  # rolls: head writes
            assert await store.append(T, Q, body(i), timestamp=1_000 * (i + 1)) == i
            await store.flush()
        assert len(bucket.log) == 2
        assert await read_all(store) == [body(i) for i in range(80)]
    finally:
        with contextlib.suppress(*FENCED):
            await store.close()


# --- 4. managed ledger: a rollover whose head landed unanswered deletes its ledger ----


async def open_ledger(bucket: Scripted, tmp_path: Path) -> ManagedLedger:
    return await ManagedLedger.open(
        "tenant/ns/persistent/repro", metadata_store=bucket,
        ledgers=LocalLedgerStore(tmp_path / "ledgers", fsync=False),
        config=ManagedLedgerConfig(auto_offload=False), writer_id="repro")


# Was: ManagedLedger._commit_rollover (tieredstore/ledger/managed/managed_ledger.py): the head
# write naming the new ledger lands but its answer is lost (retries exhausted); settle() fails
# too (suppressed), so the stale in-memory head says the write did not land and the new ledger
# is deleted from the ledger store. The head in the bucket names it as the open ledger: every
# later open raises LedgerNotFound, the managed ledger is lost for good. The outcome is unknown
# there: the ledger must be kept (and deleted only once settle proves the head did not land).
# Chaos: several default seeds ('ledger open raised LedgerNotFound'), with or without data
# faults.
async def test_a_rollover_whose_head_write_is_unanswered_keeps_its_ledger(
        tmp_path: Path) -> None:
    bucket = Scripted()
    ml = await open_ledger(bucket, tmp_path)
    await ml.add_entries([b"a", b"b", b"c"])
    # The head write lands, its answer is lost, the retries fail; the settle's listing too.
    bucket.script("put", "/head-", FaultKind.REPLY_LOST, *[FaultKind.ERROR_BEFORE] * 3)
    bucket.script("list", "/head-", *[FaultKind.ERROR_BEFORE] * 4)
    with pytest.raises(TieredStoreError):
        await ml.rollover()
    assert not bucket.pending
    with contextlib.suppress(TieredStoreError):
        await ml.close()
    again = await open_ledger(bucket, tmp_path)  # faults over
    try:
        assert [e.payload for e in await again.read_entries(0, 0, 2)] == [b"a", b"b", b"c"]
    finally:
        await again.close()


# --- 5. a lost reply, then a corrupted GET of the sealed marker: a false fence --------


def change_recorded_size(data: bytes) -> bytes:
    """One bit flip in the last digit of the marker's size (still a valid marker)."""
    end = data.index(b",")  # {"size": 24301, "format": ...}
    out = bytearray(data)
    out[end - 1] ^= 1
    return bytes(out)


# Was: ChunkedSegment._write_marker (tieredstore/segment/chunked.py): after a lost reply the
# retried marker put gets 412 and GETs the marker to compare sizes; the marker (JSON,
# docs/chunks.md) has no checksum, so one flipped bit in its digits reads as 'sealed marker says
# N bytes, we hold M: another writer' and the roll fences the only writer for good (a bit
# elsewhere: CorruptSegment 'sealed marker is unreadable'). Chaos: rare, seen e.g. in seed 47 of
# a 600-step run.
async def test_lost_reply_then_corrupted_read_of_the_sealed_marker_is_not_a_fence() -> None:
    bucket = Scripted()
    store = await open_store(bucket)
    try:
        bucket.script("put", "/sealed", FaultKind.REPLY_LOST)  # the roll's marker lands
        bucket.flip("/sealed", change_recorded_size)  # ...the GET that checks it: 1 bit
        for i in range(80):  # past the first roll
            assert await store.append(T, Q, body(i), timestamp=1_000 * (i + 1)) == i
            await store.flush()
        assert len(bucket.log) == 2
        assert await read_all(store) == [body(i) for i in range(80)]
    finally:
        with contextlib.suppress(*FENCED):
            await store.close()


# Was: _from_listing (tieredstore/segment/recovery.py) decoded each GET of a sealed marker
# as it came: a flipped bit made it 'sealed marker ... is unreadable' (or a wrong size), a
# CorruptSegment that only listing the segment again (4 times in all) retried, and the store
# opening the queue (a takeover, while the old writer's seal waited for its merge) marked the
# queue corrupt when the last listing's read was the damaged one. Chaos: test_chaos_log seed 257
# under CPU load. Here: four damaged reads in a row, one per listing before the fix.
@pytest.mark.parametrize("mutate", [flip_bit(2), change_recorded_size],
                         ids=["unreadable", "another-size"])
async def test_one_corrupted_read_of_a_sealed_marker_at_open_is_read_again(
        mutate: object) -> None:
    bucket = Scripted()
    path = SegmentPath("c", "b", T, Q, FileType.COMMIT_LOG, 0)
    segment = await ChunkedSegment.open(bucket, path, options=SegmentOptions(chunk_size=1024))
    data = bytes(range(256)) * 10
    await segment.commit0(0, data)
    await segment.seal(merge=False)  # the marker stays until a merge
    for _ in range(4):
        bucket.flip("/sealed", mutate)  # type: ignore[arg-type]
    again = await ChunkedSegment.open(bucket, path, options=SegmentOptions(chunk_size=1024))
    assert len(bucket.log) == 4  # the marker's first four reads were damaged
    assert again.sealed and await again.read0(0, len(data)) == data


# --- 6. a merge that finds the segment merged by another writer keeps its upload ------


# Was: merge_chunks (tieredstore/segment/merge.py): when the conditional complete gets 412
# because another writer merged the segment first, check_existing_merge() accepts the object and
# merge_chunks returns normally, but the 412 left our multipart upload in place (S3 keeps an
# upload whose complete failed) and nothing aborts it: every takeover that races a merge leaks
# one upload, from a live writer that knows its id. Chaos: rare, an upload left that no fault
# explains (seen e.g. in seed 75 of a 600-step run).
async def test_a_merge_that_finds_the_segment_merged_leaves_no_upload() -> None:
    bucket = Scripted()
    path = SegmentPath("c", "b", T, Q, FileType.COMMIT_LOG, 0, prefix="ts")
    options = SegmentOptions(chunk_size=4096, merge_on_seal=True)
    async with Fetcher(bucket) as cache:  # keeps the chunks the writer committed
        first = await ChunkedSegment.open(bucket, path, options=options, reader=cache,
                                          claim=True)
        for i in range(3):
            await first.commit0(i * 4096, body(i, 4096))
        await first.seal(merge=False)  # sealed; its merge is owed
        # The writer's merge has listed the uploads (none) and is about to begin its own...
        held = bucket.hold("create_multipart", "/segment")
        merging = asyncio.ensure_future(first.seal(merge=True))
        await asyncio.wait_for(held.reached.wait(), 10)
        # ...when the writer that took the queue over resumes the owed merge, to the end.
        second = await ChunkedSegment.open(bucket, path, options=options)
        assert second.merged
        held.go.set()
        await merging  # 412 on complete: the same object stands, accepted
        assert first.merged
    assert await bucket.inner.list_multipart_uploads("") == []


# --- 7. retention destroys a segment whose merge is under way: the queue is lost ------


# Was: OwnedQueue.delete_expired (tieredstore/store/write/queue.py) destroys an expired segment
# while its background merge (FlatFile._merge, spawned at the roll or resumed at open) is under way,
# and leaves it in the 'merging.commitlog' head property. The merge's ChunkedSegment.seal ->
# _write_marker re-creates the 'sealed' marker that destroy_segment just deleted (If-None-Match
# finds the key free), then fails on the missing chunks. From then on every open resumes that
# merge (FlatFile.open -> open_sealed) and finds 'sealed at N bytes but the chunks cover [0,
# 0)': CorruptSegment, the whole queue is reported corrupt, every acknowledged message in it
# unreachable, for good. No fault is needed, only a slow merge. Chaos: found with data faults on
# segment objects only (seed 9): every open after the retention pass, faults off too, reports
# the queue corrupt.
async def test_retention_during_a_merge_leaves_the_queue_readable() -> None:
    bucket = Scripted()
    store = await open_store(bucket)
    # The background merge of commit-log segment 0 stops before it writes the marker
    # again (the roll wrote it first).
    held = bucket.hold("put", "/commitlog/seg-00000000000000000000/sealed", nth=2)
    for i in range(150):
        assert await store.append(T, Q, body(i), timestamp=1_000 * (i + 1)) == i
    await store.flush()
    await asyncio.wait_for(held.reached.wait(), 10)
    # Retention expires the first consume-queue segment and commit-log segment 0.
    assert await store.delete_expired(now=66) >= 2
    first = await store.min_offset(T, Q)
    held.go.set()
    await store.close()  # waits for the merge, which fails
    again = await open_store(bucket)
    try:
        assert again.corrupt == {}
        assert await again.min_offset(T, Q) == first
        assert await read_all(again) == [body(i) for i in range(first, 150)]
    finally:
        await again.close()


# --- 8. offloader: a lost reply, then a corrupted GET of its own index: "fenced" -------


# Was: SegmentLedgerOffloader._put_index (tieredstore/ledger/offload/offloader.py): after a
# lost reply the retried index put gets 412 and GETs the index to compare; the raw bytes are
# compared (!= data) with no checksum, so a corrupted GET raises OffloadFenced ('a different
# index ... exists') for an offload that had completed; the attempt is then deleted. Chaos:
# rare, seen e.g. in seed 43 of a 600-step run.
async def test_lost_reply_then_corrupted_read_of_the_offload_index_is_not_a_fence(
        tmp_path: Path) -> None:
    bucket = Scripted()
    ledgers = LocalLedgerStore(tmp_path / "ledgers", fsync=False)
    writer = await ledgers.create_ledger()
    await writer.append_many([body(i, 300) for i in range(20)])
    await writer.close()
    source = await ledgers.open_ledger(writer.ledger_id)
    offloader = SegmentLedgerOffloader(bucket, options=OffloadOptions(
        block_size=5 * 1024 * 1024))
    uuid = UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    bucket.script("put", "-index", FaultKind.REPLY_LOST)  # the index lands
    bucket.flip("-index", flip_bit(-1))  # ...the GET that checks it is damaged
    try:
        await offloader.offload(source, uuid, {})
        copy = await offloader.read_offloaded(source.ledger_id, uuid)
        assert [e.payload for e in await copy.read(0, 19)] == [body(i, 300) for i in range(20)]
        await copy.close()
    finally:
        await source.close()
        await offloader.close()
