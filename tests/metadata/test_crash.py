"""Crash at every put, before it lands or after: the bucket alone recovers.

The model is a plain list of records and a dict of properties: after a crash
and a reopen the queue holds exactly the acknowledged operations, plus (when
the crash came after the head landed) the one in flight. Retrying that one
and running the rest then ends where a run without a crash ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.metadata.helpers import Crash, CrashingStore, record
from tieredstore.metadata import (
    COMMIT_LOG,
    MetadataFenced,
    QueueMetadata,
    QueuePath,
    SegmentRecord,
)
from tieredstore.metadata.format import build_page, record_end
from tieredstore.objectstore import ByteRange, ObjectData, ObjectStore

QUEUE = QueuePath("root", "t", 0)
PAGE_SIZE = 3

Op = tuple[str, object]
OPS: list[Op] = [
    *(("append", record(i)) for i in range(7)),
    ("props", {"next": "70"}),
    ("trim", 450),
    *(("append", record(i)) for i in range(7, 11)),
    ("append_many", [record(i) for i in range(11, 18)]),
    ("props", {"next": "180", "commit.g": "12"}),
    ("trim", 1000),
]


@dataclass
class Model:
    records: list[SegmentRecord] = field(default_factory=list)
    trimmed_to: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    def apply(self, op: Op) -> None:
        kind, arg = op
        if kind == "append":
            assert isinstance(arg, SegmentRecord)
            self.records.append(arg)
        elif kind == "append_many":
            assert isinstance(arg, list)
            self.records.extend(arg)
        elif kind == "props":
            assert isinstance(arg, dict)
            self.properties.update(arg)
        else:
            assert isinstance(arg, int)
            self.trimmed_to = max(self.trimmed_to, arg)

    def view(self) -> tuple[list[SegmentRecord], dict[str, str]]:
        return [r for r in self.records if record_end(r) > self.trimmed_to], self.properties


async def run(md: QueueMetadata, op: Op) -> None:
    kind, arg = op
    if kind == "append":
        assert isinstance(arg, SegmentRecord)
        await md.append(arg)
    elif kind == "append_many":  # resume after what landed, as a recovering host does
        assert isinstance(arg, list)
        await md.append_many(r for r in arg if r.base_offset >= md.next_base_offset(COMMIT_LOG))
    elif kind == "props":
        assert isinstance(arg, dict)
        await md.set_properties(arg)
    else:
        assert isinstance(arg, int)
        await md.trim(COMMIT_LOG, arg)


async def state(store: ObjectStore) -> tuple[list[SegmentRecord], dict[str, str]]:
    md = await QueueMetadata.open_read_only(store, QUEUE)
    return [r async for r in md.records(COMMIT_LOG)], dict(md.properties)


class GetRecordingStore(CrashingStore):
    """A crashing store that also remembers the key of every GET."""

    def __init__(self, crash_at: int | None = None, *, after: bool = False) -> None:
        super().__init__(crash_at, after=after)
        self.got: list[str] = []

    async def get_object(self, key: str, byte_range: ByteRange | None = None) -> ObjectData:
        self.got.append(key)
        return await super().get_object(key, byte_range)


async def check_pages_are_referenced(store: GetRecordingStore) -> None:
    """Every page left in the bucket is one the head references: a fresh reader
    that reads every record GETs each of them, and nothing else is listed."""
    md = await QueueMetadata.open_read_only(store, QUEUE)
    store.got.clear()
    assert [r async for r in md.records(COMMIT_LOG)]
    prefix = QUEUE.pages_prefix(COMMIT_LOG)
    read = {key for key in store.got if key.startswith(prefix)}
    listed = {o.key for o in await store.list_all(prefix)}
    assert listed == read, f"pages the head does not reference: {sorted(listed - read)}"


async def total_puts() -> int:
    store = CrashingStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=PAGE_SIZE)
    for op in OPS:
        await run(md, op)
    return store.puts


@pytest.mark.parametrize("after", [False, True], ids=["before-landing", "after-landing"])
async def test_crash_at_every_put_recovers(after: bool) -> None:
    final = Model()
    for op in OPS:
        final.apply(op)
    n_puts = await total_puts()
    for crash_at in range(1, n_puts + 1):
        store = GetRecordingStore(crash_at, after=after)
        md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=PAGE_SIZE)
        acked = Model()
        done = 0
        with pytest.raises(Crash):
            for op in OPS:
                await run(md, op)
                acked.apply(op)
                done += 1
        store.disarm()
        with_inflight = Model(list(acked.records), acked.trimmed_to, dict(acked.properties))
        with_inflight.apply(OPS[done])
        found = await state(store) if (await store.list_all(QUEUE.heads_prefix)) else ([], {})
        assert found in (acked.view(), with_inflight.view()), f"crash at put {crash_at}"

        md = await QueueMetadata.open(store, QUEUE, writer_id="w2", page_size=PAGE_SIZE)
        for op in OPS[done:]:
            await run(md, op)
        assert await state(store) == final.view(), f"crash at put {crash_at}"
        await md.vacuum()
        await check_pages_are_referenced(store)


async def test_page_written_head_not_the_next_open_adopts_the_page() -> None:
    store = CrashingStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=2)
    await md.append_many([record(0), record(1)])  # the tail is full
    store.crash_at = store.puts + 2  # the page lands, the head does not
    with pytest.raises(Crash):
        await md.append(record(2))
    store.disarm()
    assert len(await store.list_all(QUEUE.pages_prefix(COMMIT_LOG))) == 1
    reopened = await QueueMetadata.open(store, QUEUE, writer_id="w2")
    assert reopened.version == md.version + 1  # a head that references the page
    head = reopened.head.files[0]
    assert len(head.tail) == 0 and head.paged_through == 200 and head.pages_written == 1
    await reopened.append(record(2))
    assert await state(store) == ([record(0), record(1), record(2)], {})


def primed(i: int) -> SegmentRecord:
    """Record ``i`` as a different history would have sealed it."""
    r = record(i)
    r.sealed_at_ms += 1
    return r


async def test_pages_whose_head_never_landed_are_ignored_whatever_they_hold() -> None:
    store = CrashingStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=2)
    await md.append_many([record(0), record(1)])
    store.crash_at = store.puts + 4  # pages [0,1] [2,3] [4,5] land, the head does not
    with pytest.raises(Crash):
        await md.append_many([record(i) for i in range(2, 8)])
    store.disarm()

    # The host recovers and seals a different history over the same offsets.
    again = await QueueMetadata.open(store, QUEUE, writer_id="w2")  # adopts [0,1]
    await again.append_many([primed(i) for i in range(2, 8)])
    listed = await store.list_all(QUEUE.pages_prefix(COMMIT_LOG))
    assert len(listed) == 5  # [0,1], [2,3] twice, [4,5] twice
    expected = [record(0), record(1), *(primed(i) for i in range(2, 8))]
    for reader in (again, await QueueMetadata.open_read_only(store, QUEUE)):
        assert [r async for r in reader.records(COMMIT_LOG)] == expected
        assert await reader.find_by_base_offset(COMMIT_LOG, 450) == primed(4)
        assert await reader.find_by_message_offset(COMMIT_LOG, 25) == primed(2)
    assert await again.vacuum() == 0
    assert await again.vacuum(unreferenced=True, unreferenced_age=0) == 2
    assert [r async for r in again.records(COMMIT_LOG)] == expected


async def test_damaged_bytes_at_a_full_tails_page_key_are_deleted_on_open() -> None:
    store = CrashingStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=2)
    await md.append_many([record(0), record(1)])
    ref, data = build_page(QUEUE, COMMIT_LOG, [record(0), record(1)], 0)
    await store.put(ref.key, data[:-1])
    reopened = await QueueMetadata.open(store, QUEUE, writer_id="w2")
    assert reopened.version == md.version  # nothing adopted
    assert await store.list_all(QUEUE.pages_prefix(COMMIT_LOG)) == []
    await reopened.append(record(2))
    assert await state(store) == ([record(0), record(1), record(2)], {})


async def test_a_page_write_that_finds_damaged_bytes_at_its_key_repairs_them() -> None:
    store = CrashingStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=2)
    await md.append_many([record(0), record(1)])
    ref, data = build_page(QUEUE, COMMIT_LOG, [record(0), record(1)], 0)
    await store.put(ref.key, b"\0" + data[1:])
    await md.append(record(2))
    assert await store.get(ref.key) == data
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert await reader.find_by_base_offset(COMMIT_LOG, 0) == record(0)


@pytest.mark.parametrize("after", [False, True], ids=["did-not-land", "landed"])
async def test_a_head_write_without_an_answer_is_settled_by_the_next_write(after: bool) -> None:
    store = CrashingStore(after=after)
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=4)
    await md.append(record(0))
    store.crash_at = store.puts + 1
    with pytest.raises(Crash):
        await md.append(record(1))
    store.disarm()
    await md.append(record(1))  # a retry: a no-op if the first one landed
    await md.append(record(2))
    assert not md.fenced
    assert await state(store) == ([record(0), record(1), record(2)], {})


async def test_settling_finds_another_writers_head_and_fences() -> None:
    store = CrashingStore(after=True)
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=4)
    await md.append(record(0))
    store.crash_at = store.puts + 1
    with pytest.raises(Crash):
        await md.append(record(1))
    store.disarm()
    other = await QueueMetadata.open(store, QUEUE, writer_id="x")
    await other.append(record(2))
    with pytest.raises(MetadataFenced):
        await md.append(record(3))
