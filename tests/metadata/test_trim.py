"""Trimming moves the first pointer, then whole pages behind it go."""

from __future__ import annotations

import pytest

from tests.metadata.helpers import Crash, CrashingStore, bases, record
from tieredstore.metadata import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    First,
    PageMissing,
    QueueMetadata,
    QueuePath,
    RecordOrderError,
)
from tieredstore.objectstore import MemoryObjectStore, ObjectStore

QUEUE = QueuePath("root", "t", 0)
PAGES = QUEUE.pages_prefix(COMMIT_LOG)


async def page_bases(store: ObjectStore) -> list[int]:
    return [int(o.key[len(PAGES) :].split("-")[1]) for o in await store.list_all(PAGES)]


async def twenty(store: ObjectStore) -> QueueMetadata:
    """Pages of records 0-3, 4-7, 8-11, 12-15; 16-19 in the tail."""
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=4)
    await md.append_many(record(i) for i in range(20))
    assert await page_bases(store) == [0, 400, 800, 1200]
    return md


async def test_trim_drops_whole_pages_and_hides_the_records_behind_first(
    fast_store: ObjectStore,
) -> None:
    md = await twenty(fast_store)
    assert await md.trim(COMMIT_LOG, 900) == First(900, 90)
    assert await page_bases(fast_store) == [800, 1200]  # page 800 still holds 900..1199
    for opened in (md, await QueueMetadata.open_read_only(fast_store, QUEUE)):
        assert bases([r async for r in opened.records(COMMIT_LOG)]) == list(range(900, 2000, 100))
        assert await opened.find_by_base_offset(COMMIT_LOG, 850) is None
        assert await opened.find_by_message_offset(COMMIT_LOG, 89) is None
        assert await opened.find_by_time(COMMIT_LOG, 0) == record(9)
        assert opened.first(COMMIT_LOG) == First(900, 90)


async def test_trim_keeps_a_straddling_segment_and_is_idempotent() -> None:
    store = MemoryObjectStore()
    md = await twenty(store)
    assert await md.trim(COMMIT_LOG, 950) == First(900, 90)
    version = md.version
    assert await md.trim(COMMIT_LOG, 950) == First(900, 90)
    assert await md.trim(COMMIT_LOG, 100) == First(900, 90)
    assert md.version == version


async def test_trim_to_the_first_record_of_the_next_page_reads_no_page() -> None:
    store = MemoryObjectStore()
    md = await twenty(store)
    await md.trim(COMMIT_LOG, 300)  # lists pages, reads page 0
    gets = store.metrics.requests["get"]
    assert await md.trim(COMMIT_LOG, 400) == First(400, 40)  # page 400's key says it
    assert store.metrics.requests["get"] == gets


async def test_trimming_everything_then_appending_again() -> None:
    store = MemoryObjectStore()
    md = await twenty(store)
    assert await md.trim(COMMIT_LOG, 10**9) == First(2000, 200)
    assert await page_bases(store) == []
    assert md.last_record(COMMIT_LOG) is None
    assert [r async for r in md.records(COMMIT_LOG)] == []
    assert await md.find_by_time(COMMIT_LOG, 0) is None
    await md.append(record(20))
    assert md.first(COMMIT_LOG) == First(2000, 200)
    assert [r async for r in md.records(COMMIT_LOG)] == [record(20)]


async def test_a_full_tail_wholly_trimmed_is_dropped_not_paged() -> None:
    store = MemoryObjectStore()
    md = await twenty(store)
    await md.trim(COMMIT_LOG, 2000)
    puts = store.metrics.requests["put"]
    await md.append(record(20))  # the tail 16..19 is full and dead
    assert store.metrics.requests["put"] == puts + 1  # the head only
    assert await page_bases(store) == []
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(20)]


async def test_file_types_trim_apart() -> None:
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=2)
    await md.append_many([*(record(i) for i in range(6)),
                          *(record(i, CONSUME_QUEUE, size=20) for i in range(6))])
    await md.trim(CONSUME_QUEUE, 60)
    assert md.first(CONSUME_QUEUE) == First(60, 30)
    assert md.first(COMMIT_LOG) == First(0, 0)
    assert len([r async for r in md.records(COMMIT_LOG)]) == 6


async def test_pages_an_interrupted_trim_left_are_deleted_by_vacuum_or_the_next_trim() -> None:
    store = CrashingStore()
    md = await twenty(store)
    store.fail_deletes = 1
    with pytest.raises(Crash):
        await md.trim(COMMIT_LOG, 900)  # head written, pages not deleted
    assert await page_bases(store) == [0, 400, 800, 1200]
    reopened = await QueueMetadata.open(store, QUEUE, writer_id="w2")
    assert bases([r async for r in reopened.records(COMMIT_LOG)])[0] == 900  # dead pages unread
    assert await reopened.vacuum() == 2
    assert await page_bases(store) == [800, 1200]

    store.fail_deletes = 1
    with pytest.raises(Crash):
        await reopened.trim(COMMIT_LOG, 1300)
    again = await QueueMetadata.open(store, QUEUE, writer_id="w3")
    await again.trim(COMMIT_LOG, 1400)  # sweeps page 800 too
    assert await page_bases(store) == [1200]


async def test_a_read_only_snapshot_overtaken_by_a_trim_says_so_and_refresh_recovers() -> None:
    store = MemoryObjectStore()
    md = await twenty(store)
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    await md.trim(COMMIT_LOG, 900)
    with pytest.raises(PageMissing):
        await reader.find_by_base_offset(COMMIT_LOG, 450)
    await reader.refresh()
    assert await reader.find_by_base_offset(COMMIT_LOG, 450) is None
    assert await reader.find_by_base_offset(COMMIT_LOG, 950) == record(9)


async def test_a_start_is_a_first_pointer_with_no_record_behind_it() -> None:
    """A rebuild after lost heads says where a file whose earlier segments retention
    deleted goes on: its first pointer, with no record (nothing to trim)."""
    store = MemoryObjectStore()
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=4)
    assert await md.append_many([record(0, CONSUME_QUEUE)],
                                starts={COMMIT_LOG: First(500, 50)}) == 1
    version = md.version
    assert await md.append_many([], starts={COMMIT_LOG: First(500, 50)}) == 0
    assert md.version == version  # the same start again writes nothing
    for opened in (md, await QueueMetadata.open_read_only(store, QUEUE)):
        assert opened.first(COMMIT_LOG) == First(500, 50)
        assert (opened.next_base_offset(COMMIT_LOG), opened.next_message_offset(COMMIT_LOG)) \
            == (500, 50)
        assert opened.last_record(COMMIT_LOG) is None
        assert [r async for r in opened.records(COMMIT_LOG)] == []
    with pytest.raises(RecordOrderError, match="precedes the file's start"):
        await md.append(record(4))  # base 400: before the start
    await md.append(record(5))
    assert md.first(COMMIT_LOG) == First(500, 50)
    assert md.next_base_offset(COMMIT_LOG) == 600
    # A file with records keeps its own first pointer.
    assert await md.append_many([], starts={COMMIT_LOG: First(900, 90)}) == 0
    assert md.first(COMMIT_LOG) == First(500, 50)
