"""Failover bugs found by the two-process test (test_failover_processes.py), made exact.

Each test replays, in one event loop, an interleaving that the process test hit
at random. Two message stores share one memory bucket through their own
:class:`Gated` wrappers, so that a chosen request of one writer can be held
until the other has done its part. Both bugs are fixed (ba9e643: re-dispatch
no longer flushes the commit log; 4561957: recover_segment lists again when
the marker it listed is gone); at c2e1db7 all three tests fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from tests.store.conftest import KiB, small_config
from tests.store.test_failover import close_quietly, read_bodies
from tieredstore.errors import SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import (
    ByteRange,
    MemoryObjectStore,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
)
from tieredstore.store import AsyncMessageStore
from tieredstore.testing import ForwardingObjectStore

FENCED = (SegmentFenced, MetadataFenced)
Match = Callable[[str, Mapping[str, str]], bool]


@dataclass
class Hold:
    """The first request ``op`` that ``match``es: ``reached`` is set when it comes;
    a holding one waits for :meth:`release` before it goes to the bucket, a
    signalling one (``after``) just tells that it is done."""

    op: str
    match: Match
    after: bool = False
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    go: asyncio.Event = field(default_factory=asyncio.Event)
    fired: bool = False

    def release(self) -> None:
        self.go.set()


class Gated(ForwardingObjectStore):
    """One writer's view of a shared bucket, whose requests the test can hold."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.holds: list[Hold] = []

    def hold(self, op: str, match: Match) -> Hold:
        self.holds.append(Hold(op, match))
        return self.holds[-1]

    def signal_after(self, op: str, match: Match) -> Hold:
        self.holds.append(Hold(op, match, after=True))
        return self.holds[-1]

    async def _gate(self, op: str, keys: Sequence[str], metadata: Mapping[str, str] | None,
                    *, after: bool = False) -> None:
        for hold in self.holds:
            if (hold.fired or hold.op != op or hold.after != after
                    or not any(hold.match(k, metadata or {}) for k in keys)):
                continue
            hold.fired = True
            hold.reached.set()
            if not after:
                await hold.go.wait()

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        await self._gate("put", [key], metadata)
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        await self._gate("put", [key], metadata, after=True)
        return info

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        await self._gate("get_object", [key], None)
        return await super().get_object(key, byte_range)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self._gate("delete_many", keys, None)
        await super().delete_many(keys)
        await self._gate("delete_many", keys, None, after=True)

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        await self._gate("complete_multipart", [key], None)
        return await super().complete_multipart(key, upload_id, parts,
                                                if_none_match=if_none_match)


def body(n: int, size: int = 1000) -> bytes:
    return (f"{n:08d}".encode() * (size // 8 + 1))[:size]


async def open_store(bucket: ObjectStore) -> AsyncMessageStore:
    return await AsyncMessageStore.open(small_config(commit_log_max_size=8 * KiB), store=bucket)


async def read_all(bucket: ObjectStore) -> list[bytes]:
    reader = await open_store(Gated(bucket))
    try:
        assert reader.corrupt == {}
        return await read_bodies(reader)
    finally:
        await reader.close()


@pytest.mark.parametrize("old_writer", ["fenced", "crashed"])
async def test_a_takeover_between_a_commit_log_seal_and_its_record(old_writer: str) -> None:
    """The old writer rolls its commit log: the seal entry and the marker land,
    the head write that records the segment has not yet (it is held). The new
    writer opens then: the sealed, unrecorded segment is a state the protocol
    allows (writers.md, "Claim", step 2), or a crash leaves it, so the queue
    must open and keep every acknowledged message.

    Was: OwnedQueue._recover re-dispatched (and so flushed the commit log) before
    it recorded the sealed segment; FlatFile.flush() saw the sealed active
    segment and rolled it with empty stats, so the queue opened corrupt
    ("sealed segment ... holds no message")."""
    shared = MemoryObjectStore()
    old_bucket = Gated(shared)
    old = await open_store(old_bucket)
    for i in range(20):  # one commit-log segment recorded already
        await old.append("t", 0, body(i))
    await old.flush()
    sealed: list[str] = []

    def head_after_a_commit_log_seal(key: str, metadata: Mapping[str, str]) -> bool:
        if "/commitlog/" in key and metadata.get("entry") == "seal":
            sealed.append(key)
        return bool(sealed) and "/head-" in key

    record = old_bucket.hold("put", head_after_a_commit_log_seal)

    async def write_on() -> None:
        for i in range(20, 60):
            await old.append("t", 0, body(i))

    writing = asyncio.ensure_future(write_on())
    await asyncio.wait_for(record.reached.wait(), 10)
    new = await open_store(Gated(shared))
    try:
        assert new.corrupt == {}
        if old_writer == "fenced":
            record.release()
            with pytest.raises(FENCED):
                await writing
            await close_quietly(old)
        for i in range(1000, 1010):
            await new.append("t", 0, body(i))
        await new.flush()
    finally:
        writing.cancel()
        await close_quietly(new)
    got = await read_all(shared)
    assert got[:20] == [body(i) for i in range(20)]
    assert got[-10:] == [body(i) for i in range(1000, 1010)]
    assert got[:-10] == [body(i) for i in range(len(got) - 10)]


async def test_the_new_writers_open_races_the_old_writers_merge_cleanup() -> None:
    """The old writer rolled a commit-log segment and merges it in the background
    (the head lists it under ``merging.commitlog``). The new writer's open lists
    that segment while the merge is about to complete, and reads its marker just
    after the old writer's cleanup deleted it. Seen on SeaweedFS and the local
    backend as ``NoSuchKey`` on ``.../commitlog/seg-.../sealed``.

    Was: recover_segment() let the ObjectNotFound of that GET escape
    (FlatFile.open -> ctx.open_sealed -> ChunkedSegment.open), and the new
    writer's open marked the queue corrupt."""
    shared = MemoryObjectStore()
    old_bucket, new_bucket = Gated(shared), Gated(shared)
    old = await open_store(old_bucket)

    def commit_log_marker(key: str, _: Mapping[str, str]) -> bool:
        return "/commitlog/" in key and key.endswith("/sealed")

    complete = old_bucket.hold("complete_multipart", lambda key, _: "/commitlog/" in key)
    cleaned = old_bucket.signal_after("delete_many", commit_log_marker)
    for i in range(10):  # 7 records fill a segment: one roll, one merge
        await old.append("t", 0, body(i))
    await old.flush()
    await asyncio.wait_for(complete.reached.wait(), 10)

    marker_read = new_bucket.hold("get_object", commit_log_marker)
    opening = asyncio.ensure_future(open_store(new_bucket))
    await asyncio.wait_for(marker_read.reached.wait(), 10)  # listed: chunks + marker
    complete.release()
    await asyncio.wait_for(cleaned.reached.wait(), 10)  # merged; chunks, marker deleted
    marker_read.release()
    new = await opening
    try:
        assert new.corrupt == {}
        for i in range(1000, 1010):
            await new.append("t", 0, body(i))
        await new.flush()
    finally:
        await close_quietly(old)
        await close_quietly(new)
    assert await read_all(shared) == [body(i) for i in range(10)] + [
        body(i) for i in range(1000, 1010)]
