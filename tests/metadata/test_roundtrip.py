"""Round trips on every backend: what is written reads back, after reopening too."""

from __future__ import annotations

import pytest

from tests.metadata.helpers import bases, record
from tieredstore.metadata import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    First,
    MetadataFenced,
    MetadataNotFound,
    MetadataReadOnly,
    QueueMetadata,
    QueuePath,
    list_queues,
)
from tieredstore.objectstore import ObjectStore

QUEUE = QueuePath("root", "orders", 3)


async def test_round_trip_pages_tail_properties_and_trim(store: ObjectStore) -> None:
    md = await QueueMetadata.open(store, QUEUE, writer_id="broker-a", page_size=2)
    for i in range(5):
        await md.append(record(i))
        await md.append(record(i, CONSUME_QUEUE, size=20))
    await md.set_properties({"commit.group-1": "41"}, next_offset="50")

    for opened in (
        await QueueMetadata.open(store, QUEUE, writer_id="broker-b", page_size=7),
        await QueueMetadata.open_read_only(store, QUEUE),
    ):
        assert opened.page_size == 2  # fixed at creation
        assert opened.writer_id == "broker-a"
        assert dict(opened.properties) == {"commit.group-1": "41", "next_offset": "50"}
        assert [r async for r in opened.records(COMMIT_LOG)] == [record(i) for i in range(5)]
        assert bases([r async for r in opened.records(CONSUME_QUEUE, from_base_offset=45)]) == [
            40, 60, 80
        ]
        assert await opened.find_by_base_offset(COMMIT_LOG, 250) == record(2)
        assert await opened.find_by_message_offset(CONSUME_QUEUE, 39) == record(3, CONSUME_QUEUE,
                                                                                 size=20)
        assert await opened.find_by_time(COMMIT_LOG, record(1).end_timestamp_ms + 1) == record(2)
        assert opened.last_record(COMMIT_LOG) == record(4)
        assert opened.first(COMMIT_LOG) == First(0, 0)

    writes = store.metrics.total_requests("put", "delete")
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert [r async for r in reader.records(CONSUME_QUEUE)][-1] == record(4, CONSUME_QUEUE, size=20)
    assert store.metrics.total_requests("put", "delete") == writes  # read-only never writes

    writer = await QueueMetadata.open(store, QUEUE, writer_id="broker-b")
    assert await writer.trim(COMMIT_LOG, 300) == First(300, 30)
    keys = [o.key for o in await store.list_all("root/meta/pages/orders/3/commit_log/")]
    assert len(keys) == 1 and "page-00000000000000000200-" in keys[0]  # [0, 100] went
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert bases([r async for r in reader.records(COMMIT_LOG)]) == [300, 400]
    assert await reader.find_by_base_offset(COMMIT_LOG, 250) is None
    assert await list_queues(store, "root") == [("orders", 3)]
    # named topics: their heads alone are listed ("order" is not a prefix of "orders")
    assert await list_queues(store, "root", ["order", "orders", "other"]) == [("orders", 3)]
    assert await list_queues(store, "root", ["order"]) == []


async def test_second_writer_wins_and_the_first_is_fenced(store: ObjectStore) -> None:
    first = await QueueMetadata.open(store, QUEUE, writer_id="a", page_size=2)
    await first.append(record(0))
    second = await QueueMetadata.open(store, QUEUE, writer_id="b")
    await second.append(record(1))
    with pytest.raises(MetadataFenced):
        await first.append(record(1))
    with pytest.raises(MetadataFenced):
        await first.set_properties(x="1")
    reader = await QueueMetadata.open_read_only(store, QUEUE)
    assert reader.writer_id == "b"
    assert [r async for r in reader.records(COMMIT_LOG)] == [record(0), record(1)]
    with pytest.raises(MetadataReadOnly):
        await reader.append(record(2))
    with pytest.raises(MetadataNotFound):
        await QueueMetadata.open_read_only(store, QueuePath("root", "orders", 4))
