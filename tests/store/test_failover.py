"""Failover: the newest open wins, and a lost reply never wedges a writer.

Two message stores share one bucket in one event loop, so that the order of
their requests can be set exactly: a wrapper store pauses a chosen request
until the test lets it go, or loses the reply of a chosen request after it
took effect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.errors import RequestTimeout, SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import (
    ByteRange,
    MemoryObjectStore,
    ObjectData,
    ObjectInfo,
    ObjectStore,
    PartInfo,
    UploadInfo,
)
from tieredstore.store import AsyncMessageStore

FENCED = (SegmentFenced, MetadataFenced)
Match = Callable[[str, Mapping[str, str]], bool]


class Steered(ObjectStore):
    """A shared memory bucket whose puts the test can pause or make lose replies.

    ``pause(match)`` holds the next matching put before it reaches the bucket
    until ``release()``; ``lose_reply(match)`` lets the next matching put take
    effect and then raises a timeout, as if the answer were lost.
    """

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(chokepoint=inner.chokepoint)
        self.inner = inner
        self._pause: Match | None = None
        self._lose: Match | None = None
        self.paused = asyncio.Event()
        self._go = asyncio.Event()
        self.lost: list[str] = []

    def pause(self, match: Match) -> None:
        self._pause, self._go = match, asyncio.Event()
        self.paused.clear()

    def release(self) -> None:
        self._go.set()

    def lose_reply(self, match: Match) -> None:
        self._lose = match

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        meta = metadata or {}
        if self._pause is not None and self._pause(key, meta):
            self._pause = None
            self.paused.set()
            await self._go.wait()
        info = await self.inner.put(key, data, if_none_match=if_none_match, metadata=metadata)
        if self._lose is not None and self._lose(key, meta):
            self._lose = None
            self.lost.append(key)
            raise RequestTimeout(f"reply to put {key} lost", op="put")
        return info

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        return await self.inner.get_object(key, byte_range)

    async def head(self, key: str) -> ObjectInfo:
        return await self.inner.head(key)

    def list_pages(self, prefix: str) -> AsyncIterator[list[ObjectInfo]]:
        return self.inner.list_pages(prefix)

    async def delete_many(self, keys: Sequence[str]) -> None:
        await self.inner.delete_many(keys)

    async def create_multipart(self, key: str, *, metadata: Mapping[str, str] | None = None
                               ) -> str:
        return await self.inner.create_multipart(key, metadata=metadata)

    async def upload_part(self, key: str, upload_id: str, part_number: int,
                          data: bytes | memoryview) -> PartInfo:
        return await self.inner.upload_part(key, upload_id, part_number, data)

    async def upload_part_copy(self, key: str, upload_id: str, part_number: int,
                               source_key: str, source_range: ByteRange) -> PartInfo:
        return await self.inner.upload_part_copy(key, upload_id, part_number, source_key,
                                                 source_range)

    async def complete_multipart(self, key: str, upload_id: str, parts: Sequence[PartInfo], *,
                                 if_none_match: bool = False) -> ObjectInfo:
        return await self.inner.complete_multipart(key, upload_id, parts,
                                                   if_none_match=if_none_match)

    async def abort_multipart(self, key: str, upload_id: str) -> None:
        await self.inner.abort_multipart(key, upload_id)

    async def list_multipart_uploads(self, prefix: str) -> list[UploadInfo]:
        return await self.inner.list_multipart_uploads(prefix)

    async def close(self) -> None:
        return None  # the bucket outlives each message store


def body(offset: int, size: int = 300) -> bytes:
    return (f"{offset:08d}".encode() * (size // 8 + 1))[:size]


async def open_store(bucket: Steered, **overrides: Any) -> AsyncMessageStore:
    return await AsyncMessageStore.open(small_config(**overrides), store=bucket)


async def read_all(bucket: Steered, topic: str = "t", queue: int = 0) -> list[bytes]:
    reader = await open_store(bucket)
    try:
        out: list[bytes] = []
        offset = await reader.min_offset(topic, queue)
        end = await reader.max_offset(topic, queue)
        while offset < end:
            got = await reader.get(topic, queue, offset, max_count=64)
            assert got, f"nothing read at offset {offset} of {end}"
            assert [m.offset for m in got] == list(range(offset, offset + len(got)))
            out.extend(m.body for m in got)
            offset += len(got)
        return out
    finally:
        await reader.close()


async def close_quietly(store: AsyncMessageStore) -> None:
    with contextlib.suppress(*FENCED):
        await store.close()


def is_commit_log_chunk(key: str, metadata: Mapping[str, str]) -> bool:
    return "/commitlog/" in key and "/chunk-" in key and "entry" not in metadata


async def test_the_newest_open_wins_and_the_old_writer_is_fenced() -> None:
    bucket = Steered(MemoryObjectStore())
    old = await open_store(bucket)
    for i in range(5):
        await old.append("t", 0, body(i))
    await old.flush()
    new = await open_store(bucket)
    with pytest.raises(FENCED):
        await old.append("t", 0, body(99))
        await old.flush()
    await close_quietly(old)
    for i in range(5, 10):
        assert await new.append("t", 0, body(i)) == i
    await new.flush()
    await new.close()
    assert await read_all(bucket) == [body(i) for i in range(10)]


async def test_the_old_writer_cannot_add_a_byte_after_the_takeover() -> None:
    """Appends the old writer makes after the new open are refused, however many,
    across rolls; what the new writer then writes is what reads back."""
    bucket = Steered(MemoryObjectStore())
    old = await open_store(bucket)
    for i in range(40):
        await old.append("t", 0, body(i, 1500))
    await old.flush()
    new = await open_store(bucket)
    refused = 0
    for i in range(40, 140):
        try:
            await old.append("t", 0, body(i, 1500))
            await old.flush()
        except FENCED:
            refused += 1
    assert refused == 100
    await close_quietly(old)
    for i in range(40, 140):
        assert await new.append("t", 0, body(i, 1500)) == i
    await new.close()
    assert await read_all(bucket) == [body(i, 1500) for i in range(140)]


async def test_a_takeover_while_a_record_is_half_written() -> None:
    """The old writer's record spans three chunks; the new writer opens after the
    first landed. The half record was never acknowledged; everything that was
    reads back, and so does everything the new writer appends."""
    bucket = Steered(MemoryObjectStore())
    old = await open_store(bucket, chunk_size=4 * KiB, max_message_size=12 * KiB,
                           group_commit_interval=10.0)
    for i in range(3):
        await old.append("t", 0, body(i))
    await old.flush()
    seen: list[str] = []

    def second_chunk_of_the_record(key: str, metadata: Mapping[str, str]) -> bool:
        if is_commit_log_chunk(key, metadata):
            seen.append(key)
        return len(seen) == 2

    bucket.pause(second_chunk_of_the_record)
    flushing = asyncio.ensure_future(_append_and_flush(old, body(3, 10 * KiB)))
    await asyncio.wait_for(bucket.paused.wait(), 10)
    new = await open_store(bucket)  # the old writer holds a third of a record
    bucket.release()
    with pytest.raises(FENCED):
        await flushing
    await close_quietly(old)
    for i in range(3, 8):
        assert await new.append("t", 0, body(i)) == i
    await new.flush()
    await new.close()
    assert await read_all(bucket) == [body(i) for i in range(8)]


async def _append_and_flush(store: AsyncMessageStore, data: bytes) -> None:
    await store.append("t", 0, data)
    await store.flush()


async def test_a_lost_reply_to_a_roll_head_write_does_not_wedge_the_writer() -> None:
    """The head write that records a rolled segment lands, its reply is lost: the
    same store goes on appending without a reopen, and every message reads back."""
    bucket = Steered(MemoryObjectStore())
    store = await open_store(bucket, commit_log_max_size=8 * KiB)
    bucket.lose_reply(lambda key, _: "/head-" in key and "meta-root" in key)
    written: list[bytes] = []
    failures = 0
    offset = 0
    while len(written) < 60:
        try:
            assert await store.append("t", 0, body(offset, 700)) == offset
        except RequestTimeout:
            failures += 1
            continue
        written.append(body(offset, 700))
        offset += 1
    await store.flush()
    assert bucket.lost and failures >= 1
    await store.close()
    assert await read_all(bucket) == written


async def test_lost_replies_on_chunks_are_retried_as_the_writers_own() -> None:
    bucket = Steered(MemoryObjectStore())
    store = await open_store(bucket)
    for i in range(20):
        if i % 5 == 0:
            bucket.lose_reply(is_commit_log_chunk)
        await store.append("t", 0, body(i, 2000))
        with contextlib.suppress(RequestTimeout):
            await store.flush()
    await store.flush()
    await store.close()
    assert len(bucket.lost) >= 3
    assert await read_all(bucket) == [body(i, 2000) for i in range(20)]
