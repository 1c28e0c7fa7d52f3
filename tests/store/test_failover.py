"""Failover: the newest open wins, and a lost reply never wedges a writer.

Two message stores share one bucket in one event loop, so that the order of
their requests can be set exactly: a wrapper store pauses a chosen request
until the test lets it go, or loses the reply of a chosen request after it
took effect.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port
from tests.store.conftest import KiB, small_config
from tieredstore.errors import CommitFailed, RequestTimeout, SegmentFenced
from tieredstore.metadata import MetadataFenced
from tieredstore.objectstore import LocalObjectStore, MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.segment.pool import CommitRetriesExhausted
from tieredstore.store import AsyncMessageStore, MessageStore
from tieredstore.testing import ForwardingObjectStore

FENCED = (SegmentFenced, MetadataFenced)
Match = Callable[[str, Mapping[str, str]], bool]


class Crash(BaseException):
    """The writer's process died here (nothing after it runs)."""


class Steered(ForwardingObjectStore):
    """A shared memory bucket whose puts the test can pause or make lose replies.

    ``pause(match)`` holds the next matching put before it reaches the bucket
    until ``release()``; ``pause(match, after=True)`` lets it take effect and
    holds its answer instead. ``lose_reply(match)`` lets the next matching put
    take effect and then raises a timeout, as if the answer were lost;
    ``crash(match)`` raises :class:`Crash` instead of making it (the process
    dies there).
    """

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self._pause: Match | None = None
        self._pause_after = False
        self._lose: Match | None = None
        self._crash: Match | None = None
        self.paused = asyncio.Event()
        self._go = asyncio.Event()
        self.lost: list[str] = []

    def pause(self, match: Match, *, after: bool = False) -> None:
        self._pause, self._pause_after, self._go = match, after, asyncio.Event()
        self.paused.clear()

    def release(self) -> None:
        self._go.set()

    def lose_reply(self, match: Match) -> None:
        self._lose = match

    def crash(self, match: Match | None) -> None:
        self._crash = match

    async def _hold(self) -> None:
        self._pause = None
        self.paused.set()
        await self._go.wait()

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        meta = metadata or {}
        if self._crash is not None and self._crash(key, meta):
            raise Crash(f"the process died before put {key}")
        held = self._pause is not None and self._pause(key, meta)
        if held and not self._pause_after:
            await self._hold()
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if held and self._pause_after:
            await self._hold()
        if self._lose is not None and self._lose(key, meta):
            self._lose = None
            self.lost.append(key)
            raise RequestTimeout(f"reply to put {key} lost", op="put")
        return info


def body(offset: int, size: int = 300) -> bytes:
    return (f"{offset:08d}".encode() * (size // 8 + 1))[:size]


async def open_store(bucket: Steered, **overrides: Any) -> AsyncMessageStore:
    return await AsyncMessageStore.open(small_config(**overrides), store=bucket)


async def read_all(bucket: Steered, topic: str = "t", queue: int = 0) -> list[bytes]:
    reader = await open_store(bucket)
    try:
        return await read_bodies(reader, topic, queue)
    finally:
        await reader.close()


async def read_bodies(reader: AsyncMessageStore, topic: str = "t", queue: int = 0
                      ) -> list[bytes]:
    """Every message body of a queue, front to back; offsets must run on."""
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


@pytest.mark.parametrize("write_mode", ["direct", "log"])
async def test_lost_replies_on_chunks_are_retried_as_the_writers_own(write_mode: str) -> None:
    """Steered loses the reply outside the chokepoint, so nothing retries the put:
    the flush reports it (the pool does not retry on its own) and the next one
    sends the same bytes again, which finds its own chunk in place. In the log
    mode chunks are written by compaction (by size, and before each roll's seal):
    a roll whose chunk lost its reply fails the append that began it, and the
    append, sent again, finishes the roll."""
    bucket = Steered(MemoryObjectStore())
    store = await open_store(bucket, write_mode=write_mode)
    reported = 0
    for i in range(20):
        if i % 5 == 0:
            bucket.lose_reply(is_commit_log_chunk)
        for attempt in range(3):
            try:
                assert await store.append("t", 0, body(i, 2000)) == i
                break
            except CommitFailed:
                assert attempt < 2
                reported += 1
        try:
            await store.flush()
        except (RequestTimeout, CommitRetriesExhausted):
            reported += 1
    # In the log mode a compaction by size runs in the background: its lost reply
    # is not the flush's (the bytes were durable in the log), the next one settles it.
    assert reported >= (3 if write_mode == "direct" else 1)
    await store.flush()
    await store.close()
    assert len(bucket.lost) >= 3
    assert await read_all(bucket) == [body(i, 2000) for i in range(20)]


def is_head(key: str, _: Mapping[str, str]) -> bool:
    return "/head-" in key and "meta-root" in key


async def test_a_merge_keeps_the_fences_a_replaced_writer_would_hit() -> None:
    """B takes over, rolls both files and merges them; the merge's cleanup must not
    free the fenced ids, or the idle old writer's appends would be acknowledged."""
    bucket = Steered(MemoryObjectStore())
    old = await open_store(bucket)
    for i in range(3):
        await old.append("t", 0, body(i, 1000))
    await old.flush()
    new = await open_store(bucket)
    for i in range(3, 73):  # past a commit-log and a consume-queue roll
        assert await new.append("t", 0, body(i, 1000)) == i
    await new.flush()
    await new.wait_idle()  # the background merges, and their cleanup, are done
    with pytest.raises(FENCED):
        for i in range(3, 6):
            await old.append("t", 0, b"OLD-" + body(i, 100))
        await old.flush()
    await close_quietly(old)
    await new.close()
    assert await read_all(bucket) == [body(i, 1000) for i in range(73)]


async def test_a_writer_opening_its_next_segment_after_a_takeover_is_fenced() -> None:
    """The old writer's roll recorded its sealed segment; before it opens the next
    one, the new writer opens and fences that next segment. The old writer must
    not adopt the fence: the newest open is never fenced."""
    bucket = Steered(MemoryObjectStore())
    old = await open_store(bucket, merge_on_seal=False)
    await old.append("t", 0, body(0, 1000))
    await old.flush()
    bucket.pause(is_head, after=True)  # the roll's record lands, its answer waits
    rolling = asyncio.ensure_future(_append_until_fenced(old, 1))
    await asyncio.wait_for(bucket.paused.wait(), 10)
    new = await open_store(bucket, merge_on_seal=False)
    bucket.release()
    with pytest.raises(FENCED):
        await rolling
    await close_quietly(old)
    start = await new.max_offset("t", 0)
    for i in range(start, start + 40):
        assert await new.append("t", 0, body(i, 1000)) == i
    await new.close()
    assert len(await read_all(bucket)) == start + 40


async def _append_until_fenced(store: AsyncMessageStore, offset: int) -> None:
    while True:
        await store.append("t", 0, body(offset, 1000))
        offset += 1
        if offset % 5 == 0:
            await store.flush()


async def test_a_lost_reply_to_a_seal_entry_does_not_fence_the_writer() -> None:
    bucket = Steered(MemoryObjectStore())
    store = await open_store(bucket)
    bucket.lose_reply(lambda key, meta: "/commitlog/" in key and meta.get("entry") == "seal")
    written: list[bytes] = []
    while not bucket.lost:
        with contextlib.suppress(RequestTimeout):
            await store.append("t", 0, body(len(written), 3000))
            written.append(body(len(written), 3000))
    for _ in range(5):  # small ones that fit: the roll still goes on first
        assert await store.append("t", 0, body(len(written), 100)) == len(written)
        written.append(body(len(written), 100))
    await store.flush()
    await store.close()
    assert await read_all(bucket) == written


@pytest.mark.parametrize("seals", [1, 2])
async def test_a_crash_between_a_commit_log_seal_and_its_record(seals: int) -> None:
    """The process dies after sealing a commit-log segment, before the head write
    that records it: every later open recovers the queue, nothing flushed lost."""
    bucket = Steered(MemoryObjectStore())
    store = await open_store(bucket)
    sealed = 0

    def after_the_seal(key: str, meta: Mapping[str, str]) -> bool:
        nonlocal sealed
        if "/commitlog/" in key and key.endswith("/sealed"):
            sealed += 1
        return sealed >= seals and is_head(key, meta)

    bucket.crash(after_the_seal)
    appended = 0  # the roll flushed the commit log: every one of them is durable
    with contextlib.suppress(Crash):
        while True:
            await store.append("t", 0, body(appended, 1000))
            appended += 1
    bucket.crash(None)  # a new process
    for _ in range(2):
        again = await open_store(bucket)
        assert again.corrupt == {}
        assert await again.max_offset("t", 0) >= appended
        await again.close()
    got = await read_all(bucket)
    assert got[:appended] == [body(i, 1000) for i in range(appended)]


class _Closes(ForwardingObjectStore):
    """Counts its close() calls (closes the store it wraps)."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner, close_inner=True)
        self.closed = 0

    async def close(self) -> None:
        self.closed += 1
        await super().close()


def test_a_fenced_close_still_releases_the_metrics_port_and_the_object_store(
        tmp_path: Path) -> None:
    """close() raises the fenced flush only after releasing everything: the old
    endpoint stops, its port opens again, and its object store is closed."""
    port = free_port()
    config = small_config(backend="local", local_path=str(tmp_path), gc_interval=0)
    bucket = _Closes(LocalObjectStore(tmp_path, fsync=False))
    old = MessageStore.open(config.replace(metrics_port=port), store=bucket)
    assert old.metrics_port == port
    old.append("t", 0, b"before")
    old.flush()
    with MessageStore.open(config) as new:
        new.append("t", 0, b"new")
        new.flush()
        for i in range(5):
            old.append("t", 0, b"old %d" % i)
        with pytest.raises(FENCED):
            old.close()
    assert bucket.closed == 1
    assert old.core.ctx.fetcher.closed
    with MessageStore.open(config.replace(metrics_port=port)) as again:
        assert again.metrics_port == port
        assert [m.body for m in again.get("t", 0, 0)] == [b"before", b"new"]
