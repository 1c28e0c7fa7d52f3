"""Random histories against a plain-list oracle that shares no code with the store.

Records come with gaps in both offset spaces and with store timestamps that
go backwards now and then; trims land anywhere; the queue is reopened
(writable and read-only) along the way. Every lookup must agree with a linear
scan of the live records.
"""

from __future__ import annotations

import random

import pytest

from tieredstore.metadata import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    FileType,
    QueueMetadata,
    QueuePath,
    SegmentRecord,
)
from tieredstore.objectstore import MemoryObjectStore

QUEUE = QueuePath("", "topic", 1)


class Oracle:
    def __init__(self) -> None:
        self.records: list[SegmentRecord] = []
        self.trimmed_to = 0

    def live(self) -> list[SegmentRecord]:
        return [r for r in self.records if r.base_offset + r.size > self.trimmed_to]

    def by_base(self, pos: int) -> SegmentRecord | None:
        return next((r for r in self.live() if r.base_offset <= pos < r.base_offset + r.size),
                    None)

    def by_message(self, off: int) -> SegmentRecord | None:
        return next((r for r in self.live()
                     if r.first_message_offset <= off <= r.last_message_offset), None)

    def by_time(self, ts: int) -> SegmentRecord | None:
        return next((r for r in self.live() if r.end_timestamp_ms >= ts), None)


def next_record(rng: random.Random, file_type: FileType, prev: SegmentRecord | None
                ) -> SegmentRecord:
    base = (prev.base_offset + prev.size if prev else rng.randrange(0, 500)) + rng.choice(
        [0, 0, 0, rng.randrange(1, 50)])
    first = (prev.last_message_offset + 1 if prev else rng.randrange(0, 50)) + rng.choice(
        [0, 0, rng.randrange(1, 5)])
    count = rng.randrange(1, 20)
    begin = (prev.end_timestamp_ms if prev else 10_000) + rng.randrange(-300, 1000)
    return SegmentRecord(
        file_type=file_type, base_offset=base, size=rng.randrange(1, 200),
        first_message_offset=first, last_message_offset=first + count - 1,
        begin_timestamp_ms=max(0, begin), end_timestamp_ms=max(0, begin) + rng.randrange(0, 900),
        message_count=count, sealed_at_ms=begin + 1000,
    )


@pytest.mark.parametrize("seed", range(12))
async def test_lookups_agree_with_a_linear_scan(seed: int) -> None:
    rng = random.Random(seed)
    store = MemoryObjectStore()
    page_size = rng.randrange(1, 6)
    md = await QueueMetadata.open(store, QUEUE, writer_id="w", page_size=page_size,
                                  cache_pages=rng.randrange(1, 4))
    oracles = {COMMIT_LOG: Oracle(), CONSUME_QUEUE: Oracle()}
    for step in range(120):
        file_type = rng.choice([COMMIT_LOG, CONSUME_QUEUE])
        oracle = oracles[file_type]
        roll = rng.random()
        if roll < 0.6:
            batch: list[SegmentRecord] = []
            for _ in range(rng.choice([1, 1, 1, rng.randrange(2, 12)])):
                batch.append(next_record(rng, file_type,
                                         batch[-1] if batch else (oracle.records or [None])[-1]))
            await md.append_many(batch)
            oracle.records.extend(batch)
        elif roll < 0.7 and oracle.records:
            last = oracle.records[-1]
            before = rng.randrange(0, last.base_offset + last.size + 50)
            await md.trim(file_type, before)
            oracle.trimmed_to = max(oracle.trimmed_to, before)
        elif roll < 0.8:
            md = await QueueMetadata.open(store, QUEUE, writer_id=f"w{step}")
        reader = md
        if md.version and rng.random() < 0.3:
            reader = await QueueMetadata.open_read_only(store, QUEUE)
        for ft, o in oracles.items():
            live = o.live()
            assert [r async for r in reader.records(ft)] == live, f"step {step}"
            assert reader.last_record(ft) == (live[-1] if live else None)
            if live:
                first = reader.first(ft)
                assert (first.base_offset, first.message_offset) == (
                    live[0].base_offset, live[0].first_message_offset)
            top = o.records[-1].base_offset + o.records[-1].size + 10 if o.records else 100
            for pos in (rng.randrange(0, top) for _ in range(4)):
                assert await reader.find_by_base_offset(ft, pos) == o.by_base(pos), pos
                start = [r async for r in reader.records(ft, from_base_offset=pos)]
                assert start == [r for r in live if r.base_offset + r.size > pos]
            top_msg = o.records[-1].last_message_offset + 5 if o.records else 10
            for off in (rng.randrange(0, top_msg) for _ in range(4)):
                assert await reader.find_by_message_offset(ft, off) == o.by_message(off), off
            for ts in (rng.randrange(9_000, 10_000 + 1000 * (len(o.records) + 2))
                       for _ in range(4)):
                assert await reader.find_by_time(ft, ts) == o.by_time(ts), ts
    listed = await store.list_all(QUEUE.pages_prefix(COMMIT_LOG))
    assert len(listed) <= len(oracles[COMMIT_LOG].records) // page_size
