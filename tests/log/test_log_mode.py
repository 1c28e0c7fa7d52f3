"""Write mode log through the message store: one log object per group commit for
every queue, pieces read back after a restart, moved into chunks by size, by
roll and by age, spent log objects deleted, a newer store fencing the log, and
a log object whose answer was lost landing once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import Any

import pytest

from tests.store.conftest import KiB, small_config
from tieredstore.errors import InvalidArgument, RequestTimeout, SegmentFenced
from tieredstore.objectstore import MemoryObjectStore, ObjectInfo, ObjectStore
from tieredstore.objectstore.chokepoint import Chokepoint, RetryPolicy
from tieredstore.segment.pool import CommitRetriesExhausted
from tieredstore.store import AsyncMessageStore, MessageStore
from tieredstore.store.base import arguments
from tieredstore.testing import ForwardingObjectStore

LOG_DIR = "/default-cluster/broker-0/log/"


def log_config(**overrides: Any) -> Any:
    """Log mode; group commits on flush only unless a test says otherwise."""
    base: dict[str, Any] = {"write_mode": "log", "group_commit_interval": 60.0,
                            "gc_interval": 0.0, "retention_interval": 0.0}
    base.update(overrides)
    return small_config(**base)


async def objects(store: ObjectStore) -> list[ObjectInfo]:
    return await store.list_all("tieredstore/")


async def log_objects(store: ObjectStore) -> list[ObjectInfo]:
    """Log objects holding bytes (fences are empty)."""
    return [o for o in await objects(store) if LOG_DIR in o.key and o.size]


async def data_chunks(store: ObjectStore) -> list[ObjectInfo]:
    return [o for o in await objects(store) if "/chunk-" in o.key and o.size]


async def until(predicate: Any, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not await predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


def body(q: int, i: int) -> bytes:
    return f"q{q}-m{i}|".encode() * 20


async def read_all(store: AsyncMessageStore, queue: int) -> list[bytes]:
    out: list[bytes] = []
    while True:
        got = await store.get("t", queue, len(out), max_count=64)
        if not got:
            return out
        out += [m.body for m in got]


async def write_rounds(store: AsyncMessageStore, queues: int, rounds: int) -> None:
    """``rounds`` rounds of one message to each queue, each round flushed."""
    for i in range(rounds):
        for q in range(queues):
            await store.append("t", q, body(q, i))
        await store.flush()


async def reads_back(store: AsyncMessageStore, queues: int, count: int) -> None:
    for q in range(queues):
        assert await read_all(store, q) == [body(q, i) for i in range(count)]


async def test_quiet_queues_share_one_log_object_per_group_commit() -> None:
    for mode, expected_chunks in (("direct", 2 * 50), ("log", 0)):
        backend = MemoryObjectStore()
        store = await AsyncMessageStore.open(log_config(write_mode=mode), store=backend)
        for q in range(50):
            await store.append("t", q, body(q, 0))
        await store.flush()
        assert len(await data_chunks(backend)) == expected_chunks, mode
        logs = await log_objects(backend)
        if mode == "log":
            # The commit logs of all 50 queues in one object, their consume queues in
            # the next (a unit is written once its record is durable).
            assert 1 <= len(logs) <= 4, [o.key for o in logs]
        else:
            assert logs == []
        await store.close()
        reopened = await AsyncMessageStore.open(log_config(write_mode=mode), store=backend)
        for q in range(50):
            assert await read_all(reopened, q) == [body(q, 0)]
        await reopened.close()


async def test_a_restart_reads_the_log_and_appends_continue_after_it() -> None:
    backend = MemoryObjectStore()
    config = log_config(chunk_size=64 * KiB)  # no full chunk: every byte in the log
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(30):
        for q in range(3):
            await store.append("t", q, body(q, i))
        if i % 5 == 4:
            await store.flush()
    await store.close()
    assert await data_chunks(backend) == []  # everything is still in log objects
    store = await AsyncMessageStore.open(config, store=backend)
    for q in range(3):
        assert await read_all(store, q) == [body(q, i) for i in range(30)]
        assert await store.append("t", q, body(q, 30)) == 30
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    for q in range(3):
        assert await read_all(store, q) == [body(q, i) for i in range(31)]
    await store.close()


async def test_log_bytes_move_into_chunks_by_age_and_spent_objects_go() -> None:
    backend = MemoryObjectStore()
    config = log_config(log_compact_age=0.0, gc_safety_age=0.0)
    store = await AsyncMessageStore.open(config, store=backend)
    for q in range(4):
        await store.append("t", q, body(q, 0))
    await store.flush()
    assert await log_objects(backend)

    async def compacted() -> bool:
        # Each file's bytes in one chunk; the log keeps its newest entry only.
        return len(await data_chunks(backend)) == 8 and len(await log_objects(backend)) <= 1

    await until(compacted)
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    for q in range(4):
        assert await read_all(store, q) == [body(q, 0)]
    await store.close()


async def test_a_full_chunk_of_log_bytes_becomes_a_chunk() -> None:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(log_config(chunk_size=1 * KiB), store=backend)
    for i in range(12):  # 260-byte records, one flush each: each flush a log piece
        await store.append("t", 0, body(0, i)[:200])
        await store.flush()
    await until(lambda: _has_commit_log_chunk(backend))
    await store.close()
    store = await AsyncMessageStore.open(log_config(chunk_size=1 * KiB), store=backend)
    assert await read_all(store, 0) == [body(0, i)[:200] for i in range(12)]
    await store.close()


async def test_a_flush_of_direct_commit_size_is_a_chunk_over_the_log_pieces() -> None:
    """Issue 32: a flush of at least ``direct_commit_size`` (short of a chunk) goes
    to its segment as one chunk, with the log pieces before it, not into a log
    object; a reopen and a roll read every message once."""
    backend = MemoryObjectStore()
    config = log_config(chunk_size=8 * KiB, direct_commit_size=2 * KiB,
                        commit_log_max_size=32 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    sent = []
    await store.append("t", 0, body(0, 0)[:100])  # a small flush: into a log object
    sent.append(body(0, 0)[:100])
    await store.flush()
    cl_pieces = len(await log_objects(backend))
    assert not await _has_commit_log_chunk(backend)
    for i in range(1, 4):  # 3 KiB of records in one flush: a partial chunk
        await store.append("t", 0, bytes([i]) * 1000)
        sent.append(bytes([i]) * 1000)
    await store.flush()
    chunks = [o for o in await data_chunks(backend) if "/commitlog/" in o.key]
    assert len(chunks) == 1 and 3000 < chunks[0].size < 8 * KiB  # the piece's bytes too
    # The flush wrote its consume-queue units only into the log, no commit-log piece.
    assert len(await log_objects(backend)) == cl_pieces + 1
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(store, 0) == sent
    for i in range(40):  # past the 32 KiB segment: it rolls, seals and merges
        await store.append("t", 0, bytes([i]) * 1000)
        sent.append(bytes([i]) * 1000)
        if i % 4 == 3:
            await store.flush()
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(store, 0) == sent
    await store.close()


async def _has_commit_log_chunk(backend: ObjectStore) -> bool:
    return any("/commitlog/" in o.key for o in await data_chunks(backend))


class _LogReads(ForwardingObjectStore):
    """Counts the GETs of log objects."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.log_gets = 0

    async def get_object(self, key: str, byte_range: Any = None) -> Any:
        if LOG_DIR in key:
            self.log_gets += 1
        return await super().get_object(key, byte_range)


@pytest.mark.parametrize("hold", [0, 64 * KiB])
async def test_a_busy_segment_builds_its_chunks_from_memory(hold: int) -> None:
    """Full chunks and seals of a queue written between flushes take the log pieces'
    bytes from what the writer kept, not from the log objects (the fetcher caches
    nothing here); with nothing kept (``log_hold_bytes`` 0) they read them back."""
    backend = _LogReads(MemoryObjectStore())
    config = log_config(chunk_size=1 * KiB, commit_log_max_size=4 * KiB,
                        memory_cache_bytes=0, log_hold_bytes=hold)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(80):
        await store.append("t", 0, body(0, i))
        await store.flush()
    await store.close()  # waits for the compactions and merges
    merged = [o for o in await objects(backend) if o.key.endswith("/segment")]
    assert len(merged) >= 3
    if hold:
        assert backend.log_gets == 0
    else:
        assert backend.log_gets >= 10, backend.log_gets
    store = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(store, 0) == [body(0, i) for i in range(80)]
    await store.close()


async def test_rolled_segments_hold_every_byte_in_chunks() -> None:
    backend = MemoryObjectStore()
    config = log_config(commit_log_max_size=4 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(60):
        await store.append("t", 0, body(0, i))
        if i % 7 == 6:
            await store.flush()
    await store.close()
    merged = [o for o in await objects(backend) if o.key.endswith("/segment")]
    assert len(merged) >= 2  # sealed after their log pieces moved into chunks, then merged
    store = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(store, 0) == [body(0, i) for i in range(60)]
    await store.close()


async def test_a_newer_store_fences_the_old_ones_log() -> None:
    backend = MemoryObjectStore()
    old = await AsyncMessageStore.open(log_config(), store=backend, writer_id="old")
    for q in range(2):
        await old.append("t", q, body(q, 0))
    await old.flush()
    new = await AsyncMessageStore.open(log_config(), store=backend, writer_id="new")
    await old.append("t", 0, body(0, 1))
    with pytest.raises(SegmentFenced):
        await old.flush()
    for q in range(2):
        assert await read_all(new, q) == [body(q, 0)]
    assert await new.append("t", 0, body(0, 9)) == 1
    await new.flush()
    await new.close()
    with pytest.raises(SegmentFenced):
        await old.close()


async def fences(store: ObjectStore) -> list[str]:
    """The log's fences (and fills): its zero-byte entries."""
    return [o.key for o in await objects(store) if LOG_DIR in o.key and not o.size]


async def test_fences_of_earlier_opens_go_once_gc_safety_age_old() -> None:
    backend = MemoryObjectStore()
    for i in range(3):
        store = await AsyncMessageStore.open(log_config(), store=backend)
        await store.append("t", 0, body(0, i))
        await store.flush()
        await store.close()
    assert len(await fences(backend)) == 3  # one per open, none deleted yet
    store = await AsyncMessageStore.open(log_config(), store=backend)
    await store.compact_log(time.time() + 60)  # not gc_safety_age old yet
    assert len(await fences(backend)) == 4
    await store.compact_log(time.time() + 3601)
    # The older fences went; this store's own stays while it is the newest entry.
    newest = max(o.key for o in await objects(backend) if LOG_DIR in o.key)
    assert await fences(backend) == [newest]
    await store.append("t", 0, body(0, 3))
    await store.flush()
    await store.compact_log(time.time() + 3601)
    assert await fences(backend) == []  # a log object is the newest entry now
    assert await read_all(store, 0) == [body(0, i) for i in range(4)]
    await store.close()
    store = await AsyncMessageStore.open(log_config(), store=backend)
    assert await read_all(store, 0) == [body(0, i) for i in range(4)]
    await store.close()


async def test_an_idle_replaced_store_looks_before_it_writes() -> None:
    """A store replaced while idle, whose next id's fence was deleted meanwhile,
    finds the newer store's entries before it creates that id: fenced, and its
    message is acknowledged nowhere. (Without the look, its log object lands
    at the freed id and its flush returns after the takeover.)"""
    backend = MemoryObjectStore()
    config = log_config(gc_safety_age=0.2)
    old = await AsyncMessageStore.open(config, store=backend, writer_id="old")
    await old.append("t", 0, body(0, 0))
    await old.flush()
    new = await AsyncMessageStore.open(config, store=backend, writer_id="new")
    await new.append("t", 1, body(1, 0))
    await new.flush()
    await new.compact_log(time.time() + 1)
    assert await fences(backend) == []  # the id the old store creates next is free
    await asyncio.sleep(0.15)  # idle past gc_safety_age / 2
    await old.append("t", 0, body(0, 1))
    with pytest.raises(SegmentFenced):
        await old.flush()
    await new.close()
    with contextlib.suppress(SegmentFenced):
        await old.close()
    reader = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(reader, 0) == [body(0, 0)]
    assert await read_all(reader, 1) == [body(1, 0)]
    await reader.close()


class LoseLogReplies(ForwardingObjectStore):
    """The first ``n`` creates of log objects take effect, and their answers are lost."""

    def __init__(self, inner: ObjectStore, n: int) -> None:
        super().__init__(inner)
        self.left = n

    async def put(self, key: str, data: bytes | memoryview, *, if_none_match: bool = False,
                  metadata: Mapping[str, str] | None = None) -> ObjectInfo:
        info = await super().put(key, data, if_none_match=if_none_match, metadata=metadata)
        if LOG_DIR in key and len(data) and self.left:
            self.left -= 1
            raise RequestTimeout(f"answer to PUT {key} lost")
        return info


async def test_a_log_object_whose_answer_was_lost_lands_once() -> None:
    inner = MemoryObjectStore(chokepoint=Chokepoint(RetryPolicy(max_attempts=1)))
    backend = LoseLogReplies(inner, n=3)  # more than the chokepoint's one attempt
    store = await AsyncMessageStore.open(log_config(retry_max_attempts=1), store=backend)
    for q in range(3):
        await store.append("t", q, body(q, 0))
    with pytest.raises(CommitRetriesExhausted):
        await store.flush()  # in doubt: the bytes stay buffered
    for _ in range(5):
        try:
            await store.flush()
            break
        except CommitRetriesExhausted:
            continue
    for q in range(3):
        assert await read_all(store, q) == [body(q, 0)]
        assert await store.commit_offset("t", q) == 1
    await store.close()
    store = await AsyncMessageStore.open(log_config(), store=inner)
    for q in range(3):
        assert await read_all(store, q) == [body(q, 0)]  # once, not twice
    await store.close()


async def test_a_direct_mode_store_takes_over_what_a_log_mode_store_left() -> None:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(log_config(), store=backend)
    for q in range(2):
        await store.append("t", q, body(q, 0))
    await store.flush()
    await store.close()
    direct = log_config(write_mode="direct")
    store = await AsyncMessageStore.open(direct, store=backend)
    for q in range(2):
        assert await store.append("t", q, body(q, 1)) == 1
    await store.flush()  # the chunk takes the log's bytes first
    await store.close()
    chunks = await data_chunks(backend)  # one per file, from byte 0 (after the fences)
    assert len(chunks) == 4
    assert all(o.key.rsplit("/", 1)[1].startswith("chunk-00000000000000000000-")
               for o in chunks)
    store = await AsyncMessageStore.open(direct, store=backend)
    for q in range(2):
        assert await read_all(store, q) == [body(q, 0), body(q, 1)]
    await store.close()


async def test_a_read_only_store_reads_what_is_only_in_the_log() -> None:
    backend = MemoryObjectStore()
    config = log_config(chunk_size=64 * KiB)
    writer = await AsyncMessageStore.open(config, store=backend)
    for i in range(10):
        for q in range(2):
            await writer.append("t", q, body(q, i))
    await writer.flush()
    assert await data_chunks(backend) == []
    reader = await AsyncMessageStore.open_read_only(config, store=backend)
    for q in range(2):
        assert await reader.max_offset("t", q) == 10
        got = await reader.get("t", q, 0, max_count=64)
        assert [m.body for m in got] == [body(q, i) for i in range(10)]
    await reader.close()
    await writer.close()


async def pieces_per_object(backend: ObjectStore) -> list[int]:
    from tieredstore.log import read_index
    return [len(await read_index(backend, o.key, o.size)) for o in await log_objects(backend)]


def consolidating_config(**overrides: Any) -> Any:
    """Consolidation by bytes, at a point the writes fix, whatever the timing: in
    ``write_rounds(store, 10, 12)`` (24 small objects, 23,680 bytes of pieces) the
    pieces held reach 16 KiB in round 9, and the 6,540 bytes after it never do
    again. The interval (60 s) never runs out within a test, and chunks are so
    large that no segment looks about to fill one within it (its pieces would wait
    for the next consolidation)."""
    return log_config(chunk_size=256 * 1024 * KiB, log_consolidate_bytes=16 * KiB,
                      log_consolidate_interval=60.0, **overrides)


async def test_consolidation_rewrites_small_log_objects_as_one() -> None:
    from tieredstore.log import read_index

    backend = MemoryObjectStore()
    config = consolidating_config(gc_safety_age=0.0)
    store = await AsyncMessageStore.open(config, store=backend)
    await write_rounds(store, 10, 12)
    assert store.snapshot()["log"]["consolidations"] == 1
    await store.compact_log()  # deletes the small objects the consolidated one replaced
    consolidated, *later = [await read_index(backend, o.key, o.size)
                            for o in sorted(await log_objects(backend), key=lambda o: o.key)]
    # The oldest log object left is the consolidated one: one piece per file of every
    # queue (20), each from the segment's start, so every small object before it,
    # all of whose pieces it took in, is gone; the small ones written after it stay,
    # their pieces past its own.
    assert sorted((p.queue_id, p.file_type.label) for p in consolidated) == \
        [(q, f) for q in range(10) for f in ("commitlog", "consumequeue")]
    assert all(p.position == 0 for p in consolidated)
    ends = {p.segment: p.end for p in consolidated}
    assert later and all(p.position >= ends[p.segment] for index in later for p in index)
    await reads_back(store, 10, 12)
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    await reads_back(store, 10, 12)
    await store.close()


async def test_consolidation_runs_once_the_interval_is_up() -> None:
    """Pieces far below ``log_consolidate_bytes`` are consolidated once
    ``log_consolidate_interval`` is up (the background pass starts it when no
    group commit does): in time every live piece is in a consolidated object, and
    the small objects go."""
    backend = MemoryObjectStore()
    config = log_config(log_consolidate_interval=0.05, gc_safety_age=0.0)
    store = await AsyncMessageStore.open(config, store=backend)
    await write_rounds(store, 10, 2)

    async def all_consolidated() -> bool:
        log = store.snapshot()["log"]
        return bool(log["consolidations"]) and log["bytes_held"] == 0 \
            and log["live_objects"] == log["consolidations"]

    await until(all_consolidated)
    await store.compact_log()
    assert len(await log_objects(backend)) == store.snapshot()["log"]["consolidations"]
    await reads_back(store, 10, 2)
    await store.close()


async def test_a_restart_reads_a_consolidated_object_beside_the_small_ones() -> None:
    backend = MemoryObjectStore()  # gc_safety_age 1 h: the small objects stay
    config = consolidating_config()
    store = await AsyncMessageStore.open(config, store=backend)
    await write_rounds(store, 10, 12)
    await store.close()
    assert max(await pieces_per_object(backend)) == 20
    store = await AsyncMessageStore.open(config, store=backend)
    await reads_back(store, 10, 12)
    for q in range(10):
        assert await store.append("t", q, body(q, 12)) == 12
    await store.close()
    reader = await AsyncMessageStore.open_read_only(config, store=backend)
    for q in range(10):
        got = await reader.get("t", q, 0, max_count=64)
        assert [m.body for m in got] == [body(q, i) for i in range(13)]
    await reader.close()


async def test_compaction_reads_each_consolidated_object_once_per_group() -> None:
    backend = MemoryObjectStore()
    config = consolidating_config()
    store = await AsyncMessageStore.open(config, store=backend)
    await write_rounds(store, 10, 12)
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    await store.wait_idle()  # its claims of the queues, in the background
    objects_left = len(await log_objects(backend))
    backend.metrics.reset()
    await store.compact_log(now=time.time() + 7200)
    gets = backend.metrics.requests["get"]
    # One group (all 20 files fit 64 MiB): one GET per log object, not one per piece
    # (there are 240 pieces).
    assert gets <= objects_left, (gets, objects_left)
    assert len(await data_chunks(backend)) == 20
    await reads_back(store, 10, 12)
    await store.close()


@pytest.mark.parametrize("file_type", ["commitlog", "consumequeue"])
async def test_a_damaged_log_piece_costs_only_its_own_range(file_type: str) -> None:
    """A flipped byte in one piece of a log object: a commit-log piece makes its
    message unreadable (an IntegrityError naming the range), a consume-queue
    piece is rebuilt from the commit log; everything else reads."""
    from tieredstore.errors import IntegrityError
    from tieredstore.log import read_index

    backend = MemoryObjectStore()
    config = log_config(chunk_size=64 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    await write_rounds(store, 2, 10)
    await store.close()
    hits = [(o.key, p) for o in await log_objects(backend)
            for p in await read_index(backend, o.key, o.size)
            if p.queue_id == 0 and p.file_type.label == file_type]
    key, piece = hits[5]  # offset 5's record or unit
    data = bytearray((await backend.get_object(key)).data)
    data[piece.object_offset + 3] ^= 0xFF
    await backend.put(key, bytes(data), metadata=(await backend.head(key)).metadata)

    store = await AsyncMessageStore.open(config, store=backend)
    assert store.corrupt == {}
    for q in range(2):
        for offset in range(10):
            if (q, offset, file_type) == (0, 5, "commitlog"):
                with pytest.raises(IntegrityError, match=r"\[\d+, \d+\)"):
                    await store.get("t", q, offset, max_count=1)
                continue
            got = await store.get("t", q, offset, max_count=1)
            assert [m.body for m in got] == [body(q, offset)]
    await store.close()


class _PutBytes(ForwardingObjectStore):
    """Sums the bytes PUT into log objects and into chunks."""

    def __init__(self, inner: ObjectStore) -> None:
        super().__init__(inner)
        self.log = self.chunks = 0

    async def put(self, key: str, data: bytes | memoryview, **kwargs: Any) -> ObjectInfo:
        if LOG_DIR in key:
            self.log += len(data)
        elif "/chunk-" in key:
            self.chunks += len(data)
        return await super().put(key, data, **kwargs)


def big(i: int) -> bytes:
    return body(0, i) * 6  # about 1 KiB


@pytest.mark.parametrize("wait", [0.0, 5.0])
async def test_a_busy_segment_waits_for_its_chunk(wait: float) -> None:
    """With ``chunk_wait``, a queue whose bytes make a chunk within it sits group
    commits out: its bytes go up once, as chunks, not through the log first. A
    flush does not wait, and everything reads back."""
    backend = _PutBytes(MemoryObjectStore())
    config = log_config(group_commit_interval=0.05, chunk_wait=wait, chunk_size=64 * KiB,
                        commit_log_max_size=1024 * KiB, pool_bytes=1024 * KiB,
                        log_object_size=1024 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    written = 0
    for i in range(256):  # about 200 KiB/s: a 64 KiB chunk every third of a second
        written += len(big(i))
        await store.append("t", 0, big(i))
        await asyncio.sleep(0.004)
    assert backend.chunks > 0
    if wait:
        assert backend.log < 0.2 * written, (backend.log, written)
    else:
        assert backend.log > 0.8 * written, (backend.log, written)
    await store.flush()
    async with await AsyncMessageStore.open_read_only(config, store=backend.inner) as reader:
        assert await reader.max_offset("t", 0) == 256  # durable once flush returned
    await store.close()
    store = await AsyncMessageStore.open(config, store=backend)
    assert await read_all(store, 0) == [big(i) for i in range(256)]
    await store.close()


async def test_consume_queue_bytes_wait_chunk_wait_and_crash_loses_nothing() -> None:
    """With ``chunk_wait``, a quiet queue's records go into group commits while its
    consume-queue units wait (re-dispatch rebuilds them): other processes see
    the messages at once all the same (the commit log's durable tail), and a
    store that takes over before the units land finds every record the group
    commits stored."""
    backend = _PutBytes(MemoryObjectStore())
    config = log_config(group_commit_interval=0.05, chunk_wait=30.0, chunk_size=64 * KiB,
                        commit_log_max_size=1024 * KiB, pool_bytes=1024 * KiB)
    store = await AsyncMessageStore.open(config, store=backend)
    for i in range(10):  # 2 KB: no chunk by then at any rate the pool would see
        await store.append("t", 0, body(0, i))
    await until(lambda: _log_holds(backend, 10 * len(body(0, 0))))
    await asyncio.sleep(0.2)  # group commits pass; the units stay
    async with await AsyncMessageStore.open_read_only(config, store=backend.inner) as reader:
        assert await reader.max_offset("t", 0) == 10
        assert [m.body for m in await reader.get("t", 0, 0, 32)] == \
            [body(0, i) for i in range(10)]
    # A newer store, as after a crash: the records are durable, the units rebuilt.
    newer = await AsyncMessageStore.open(config, store=backend.inner)
    assert await read_all(newer, 0) == [body(0, i) for i in range(10)]
    await newer.append("t", 0, body(0, 10))
    await newer.flush()  # a flush never waits
    async with await AsyncMessageStore.open_read_only(config, store=backend.inner) as reader:
        assert await reader.max_offset("t", 0) == 11
    await newer.close()
    with contextlib.suppress(SegmentFenced):
        await store.close()


async def _log_holds(backend: _PutBytes, n: int) -> bool:
    return backend.log >= n


WIDEST = 2**32 - 1  # the largest queue id: a log object's index holds it in a u32
REFUSED = r"queue_id: 4294967296 is too large .*\[0, 4294967295\]"


async def _nothing_of_queue(backend: ObjectStore, queue_id: int) -> bool:
    return not [o.key for o in await objects(backend) if f"/t/{queue_id}/" in o.key]


@pytest.mark.parametrize("batch", [False, True], ids=["append", "append_batch"])
async def test_a_queue_id_past_u32_is_refused_and_the_largest_works(batch: bool) -> None:
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(log_config(), store=backend)

    async def put(queue: int, *bodies: bytes) -> None:
        if batch:
            await store.append_batch("t", queue, list(bodies))
        for data in () if batch else bodies:
            await store.append("t", queue, data)

    await put(0, b"before")
    with pytest.raises(InvalidArgument, match=REFUSED):
        await put(WIDEST + 1, b"refused")
    await put(0, b"after")
    await put(WIDEST, b"widest")
    await store.flush()
    assert await read_all(store, 0) == [b"before", b"after"]
    await store.close()  # raises nothing
    assert await _nothing_of_queue(backend, WIDEST + 1)
    store = await AsyncMessageStore.open(log_config(), store=backend)
    assert await read_all(store, 0) == [b"before", b"after"]
    assert await read_all(store, WIDEST) == [b"widest"]
    assert sorted(store.queues()) == [("t", 0), ("t", WIDEST)]
    await store.close()


@pytest.mark.parametrize("batch", [False, True], ids=["append", "append_batch"])
def test_the_sync_store_refuses_a_queue_id_past_u32_and_takes_the_largest(
        batch: bool) -> None:
    backend = MemoryObjectStore()
    store = MessageStore.open(log_config(), store=backend)

    def put(queue: int, data: bytes) -> None:
        if batch:
            store.append_batch("t", queue, [data])
        else:
            store.append("t", queue, data)

    put(0, b"before")
    with pytest.raises(InvalidArgument, match=REFUSED):
        put(WIDEST + 1, b"refused")
    put(0, b"after")
    put(WIDEST, b"widest")
    store.flush()
    store.close()
    store = MessageStore.open(log_config(), store=backend)
    assert [m.body for m in store.get("t", 0, 0)] == [b"before", b"after"]
    assert [m.body for m in store.get("t", WIDEST, 0)] == [b"widest"]
    assert sorted(store.queues()) == [("t", 0), ("t", WIDEST)]
    store.close()


async def test_a_piece_the_log_index_cannot_hold_fails_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the argument check (were it missing), a queue whose pieces the log
    index cannot hold fails its own flush; the group commit carries the others."""
    monkeypatch.setattr(arguments, "check_queue_to_append", arguments.check_queue)
    backend = MemoryObjectStore()
    store = await AsyncMessageStore.open(log_config(), store=backend)
    await store.append("t", WIDEST + 1, b"refused")
    await store.append("t", 0, b"kept")
    with pytest.raises(Exception, match="4294967296 does not fit a log index"):
        await store.flush()
    await until(lambda: _committed(store, 1))  # the flush of queue 0 goes on
    with contextlib.suppress(Exception):
        await store.close()
    store = await AsyncMessageStore.open(log_config(), store=backend)
    assert await read_all(store, 0) == [b"kept"]
    await store.close()


async def _committed(store: AsyncMessageStore, count: int) -> bool:
    return await store.commit_offset("t", 0) == count
