"""QueueMetadata against plain lists: a Hypothesis state machine.

The model keeps, per file type, every record appended (a list) and the index
of the first live one, the head's properties (a dict), and the head version
each write must produce. Records come with gaps in both offset spaces and
with timestamps that go backwards from one record to the next; pages hold 1
to 4 records, so they are cut, read, dropped and deleted within a few steps.
The queue is reopened, read read-only, and taken over by a second writer
whose predecessor must then be fenced. Every lookup must agree with a scan
of the live records, and the page objects in the bucket must be exactly the
groups of ``page_size`` records the model expects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from tieredstore.metadata import (
    COMMIT_LOG,
    CONSUME_QUEUE,
    INDEX,
    FileType,
    First,
    MetadataFenced,
    MetadataNotFound,
    MetadataReadOnly,
    QueueMetadata,
    QueuePath,
    RecordOrderError,
    SegmentRecord,
)
from tieredstore.metadata.reader import MetadataReader
from tieredstore.objectstore import MemoryObjectStore

T = TypeVar("T")
QUEUE = QueuePath("root", "topic", 3)
TYPES: list[FileType] = [COMMIT_LOG, CONSUME_QUEUE, INDEX]
file_types = st.sampled_from([COMMIT_LOG, COMMIT_LOG, CONSUME_QUEUE, INDEX])


@dataclass(frozen=True)
class Shape:
    """How a record follows the one before it."""

    base_gap: int
    size: int
    message_gap: int
    count: int
    begin_step: int  # may be negative: timestamps need not ascend across records
    duration: int


shapes = st.builds(
    Shape,
    base_gap=st.one_of(st.just(0), st.integers(1, 50)),
    size=st.integers(1, 200),
    message_gap=st.one_of(st.just(0), st.integers(1, 5)),
    count=st.integers(1, 20),
    begin_step=st.integers(-300, 1000),
    duration=st.integers(0, 900),
)
property_names = st.sampled_from(["a", "b", "merging.commitlog"])
property_updates = st.dictionaries(property_names, st.one_of(st.none(), st.text(max_size=8)),
                                   max_size=3)


def end_of(record: SegmentRecord) -> int:
    return record.base_offset + record.size


def follow(file_type: FileType, prev: SegmentRecord | None, shape: Shape) -> SegmentRecord:
    base = (end_of(prev) if prev else 7) + shape.base_gap
    first = (prev.last_message_offset + 1 if prev else 3) + shape.message_gap
    begin = max(0, (prev.end_timestamp_ms if prev else 10_000) + shape.begin_step)
    return SegmentRecord(
        file_type=file_type, base_offset=base, size=shape.size,
        first_message_offset=first, last_message_offset=first + shape.count - 1,
        begin_timestamp_ms=begin, end_timestamp_ms=begin + shape.duration,
        message_count=shape.count, sealed_at_ms=begin + 2000,
    )


@dataclass
class FileModel:
    records: list[SegmentRecord] = field(default_factory=list)
    first_index: int = 0  # records before it were trimmed

    @property
    def live(self) -> list[SegmentRecord]:
        return self.records[self.first_index:]

    @property
    def last(self) -> SegmentRecord | None:
        return self.records[-1] if self.records else None

    def first(self) -> First:
        if self.first_index < len(self.records):
            r = self.records[self.first_index]
            return First(r.base_offset, r.first_message_offset)
        if self.records:
            last = self.records[-1]
            return First(end_of(last), last.last_message_offset + 1)
        return First(0, 0)

    def trim(self, before: int) -> bool:
        """Drop the records that end at or before ``before``; whether any went."""
        start = self.first_index
        while self.first_index < len(self.records) and \
                end_of(self.records[self.first_index]) <= before:
            self.first_index += 1
        return self.first_index != start

    def by_base(self, position: int) -> SegmentRecord | None:
        return next((r for r in self.live if r.base_offset <= position < end_of(r)), None)

    def by_message(self, offset: int) -> SegmentRecord | None:
        return next((r for r in self.live
                     if r.first_message_offset <= offset <= r.last_message_offset), None)

    def by_time(self, timestamp: int) -> SegmentRecord | None:
        return next((r for r in self.live if r.end_timestamp_ms >= timestamp), None)


class MetadataModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.bucket = MemoryObjectStore()
        self.files = {ft: FileModel() for ft in TYPES}
        self.properties: dict[str, str] = {}
        self.version = 0  # the head version the model expects
        self.writer = ""  # who wrote that head
        self.page_size = 1
        self.opens = 0
        self.strays = False  # a fenced writer may have left a page that is dead by now
        self.old: QueueMetadata | None = None
        self.read_only: QueueMetadata | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.runner.run(coro)

    def teardown(self) -> None:
        try:
            self.run(self.bucket.close())
        finally:
            self.runner.close()

    async def open(self, *, claim: bool, page_size: int) -> QueueMetadata:
        self.opens += 1
        writer = f"writer-{self.opens}"
        md = await QueueMetadata.open(self.bucket, QUEUE, writer_id=writer,
                                      page_size=page_size, cache_pages=self.cache_pages,
                                      claim=claim)
        expected = self.version + (1 if claim else 0)
        # A fenced writer's refused append may have left the page its head would
        # have referenced, at the key the tail's next page gets: adopted here, in
        # one more head write.
        adopted = self.strays and md.version == expected + 1
        assert md.version == expected or adopted, (md.version, expected)
        if md.version != self.version:
            self.version = md.version
            self.writer = writer
        return md

    def wrote(self) -> None:
        self.version += 1
        self.writer = f"writer-{self.opens}"

    @initialize(page_size=st.integers(1, 4), cache_pages=st.integers(1, 3), claim=st.booleans())
    def start(self, page_size: int, cache_pages: int, claim: bool) -> None:
        self.page_size = page_size
        self.cache_pages = cache_pages
        self.md = self.run(self.open(claim=claim, page_size=page_size))

    # --- checks -------------------------------------------------------------------

    async def check(self, reader: MetadataReader) -> None:
        """Everything a reader says from its head, and every record through pages."""
        assert reader.version == self.version
        assert reader.page_size == self.page_size
        if self.version:
            assert reader.writer_id == self.writer
        assert dict(reader.properties) == self.properties
        for ft, f in self.files.items():
            assert [r async for r in reader.records(ft)] == f.live, ft
            assert reader.last_record(ft) == (f.live[-1] if f.live else None), ft
            assert reader.first(ft) == f.first(), ft
            assert reader.next_base_offset(ft) == (end_of(f.last) if f.last else 0), ft
            assert reader.next_message_offset(ft) == \
                (f.last.last_message_offset + 1 if f.last else 0), ft
            assert (ft in reader.file_types) == bool(f.records), ft

    async def check_pages(self) -> None:
        """Pages are the groups of ``page_size`` records before the head's tail:
        each live one is in the bucket once, and nothing else is. (Once a fenced
        writer tried to append, pages its refused heads would have referenced
        may be left over: off the chain, ignored by readers.)"""
        for ft, f in self.files.items():
            prefix = QUEUE.pages_prefix(ft)
            listed = []
            for info in await self.bucket.list_all(prefix):
                ref = QUEUE.parse_page_key(ft, info.key)
                assert ref is not None, f"{ft}: {info.key} is no page key"
                listed.append((ref.first_base_offset, ref.end_offset, ref.record_count,
                               ref.first_message_offset, ref.max_end_timestamp_ms))
            n, size = len(f.records), self.page_size
            for k in range((n - 1) // size if n else 0):
                group = f.records[k * size : (k + 1) * size]
                page = (group[0].base_offset, end_of(group[-1]), len(group),
                        group[0].first_message_offset, max(r.end_timestamp_ms for r in group))
                copies = listed.count(page)
                if (k + 1) * size > f.first_index:
                    assert copies == 1 or (copies and self.strays), \
                        f"{ft}: live page {page} is there {copies} times"
                else:
                    assert copies == 0 or self.strays, f"{ft}: dead page {page} kept"
                listed = [p for p in listed if p != page]
            assert not listed or self.strays, f"{ft}: pages of no group of records: {listed}"

    @invariant()
    def agrees(self) -> None:
        if hasattr(self, "md"):
            self.run(self.check(self.md))
            self.run(self.check_pages())

    # --- rules --------------------------------------------------------------------

    def batch(self, ft: FileType, batch_shapes: list[Shape]) -> list[SegmentRecord]:
        out: list[SegmentRecord] = []
        for shape in batch_shapes:
            out.append(follow(ft, out[-1] if out else self.files[ft].last, shape))
        return out

    @rule(ft=file_types, batch_shapes=st.lists(shapes, min_size=1, max_size=6),
          updates=st.one_of(st.none(), property_updates), single=st.booleans())
    def append(self, ft: FileType, batch_shapes: list[Shape],
               updates: dict[str, str | None] | None, single: bool) -> None:
        records = self.batch(ft, batch_shapes[:1] if single else batch_shapes)
        if single:
            self.run(self.md.append(records[0], properties=updates))
        else:
            assert self.run(self.md.append_many(records, properties=updates)) == len(records)
        self.files[ft].records.extend(records)
        for key, value in (updates or {}).items():
            if value is None:
                self.properties.pop(key, None)
            else:
                self.properties[key] = value
        self.wrote()

    @precondition(lambda self: any(f.records for f in self.files.values()))
    @rule(data=st.data(), sealed_at=st.integers(0, 10**6))
    def retried_append_is_a_no_op(self, data: st.DataObject, sealed_at: int) -> None:
        ft = data.draw(st.sampled_from([ft for ft, f in self.files.items() if f.records]))
        last = self.files[ft].last
        assert last is not None
        again = SegmentRecord()
        again.CopyFrom(last)
        again.sealed_at_ms = sealed_at
        assert self.run(self.md.append_many([again])) == 0

    @precondition(lambda self: any(f.records for f in self.files.values()))
    @rule(data=st.data(), batch_shapes=st.lists(shapes, min_size=1, max_size=4),
          bad_at=st.integers(0, 3), overlap=st.integers(1, 5))
    def out_of_order_batch_writes_nothing(self, data: st.DataObject, batch_shapes: list[Shape],
                                          bad_at: int, overlap: int) -> None:
        ft = data.draw(st.sampled_from([ft for ft, f in self.files.items() if f.records]))
        records = self.batch(ft, batch_shapes)
        i = min(bad_at, len(records) - 1)
        prev = records[i - 1] if i else self.files[ft].last
        assert prev is not None
        bad = SegmentRecord()
        bad.CopyFrom(records[i])
        # A key-index record may start at the last one's last message (one message's
        # entries straddle a roll), so its bad first message is one before that.
        straddle = 1 if ft is FileType.INDEX else 0
        if data.draw(st.booleans()) or prev.last_message_offset < straddle:
            bad.base_offset = max(0, end_of(prev) - overlap)
        else:
            bad.first_message_offset = prev.last_message_offset - straddle
            bad.last_message_offset = max(bad.last_message_offset, bad.first_message_offset)
        records[i] = bad
        with pytest.raises(RecordOrderError):
            self.run(self.md.append_many(records))

    @precondition(lambda self: any(f.records for f in self.files.values()))
    @rule(data=st.data())
    def trim(self, data: st.DataObject) -> None:
        ft = data.draw(st.sampled_from([ft for ft, f in self.files.items() if f.records]))
        f = self.files[ft]
        assert f.last is not None
        before = data.draw(st.integers(0, end_of(f.last) + 50))
        first = self.run(self.md.trim(ft, before))
        if f.trim(before):
            self.wrote()
        assert first == f.first()

    @rule(updates=property_updates)
    def set_properties(self, updates: dict[str, str | None]) -> None:
        self.run(self.md.set_properties(updates))
        after = {k: v for k, v in {**self.properties, **updates}.items() if v is not None}
        if after != self.properties:
            self.properties = after
            self.wrote()

    @rule(data=st.data())
    def lookups(self, data: st.DataObject) -> None:
        """Lookups at every record's edges (one off either side), and anywhere."""
        ft = data.draw(file_types)
        f = self.files[ft]
        top = end_of(f.last) + 10 if f.last else 100
        top_message = f.last.last_message_offset + 5 if f.last else 10
        top_time = max((r.end_timestamp_ms for r in f.records), default=10_000) + 10
        positions = {p for r in f.records
                     for p in (r.base_offset - 1, r.base_offset, end_of(r) - 1, end_of(r))}
        offsets = {o for r in f.records for o in (r.first_message_offset - 1,
                                                   r.first_message_offset,
                                                   r.last_message_offset,
                                                   r.last_message_offset + 1)}
        times = {t for r in f.records for t in (r.begin_timestamp_ms, r.end_timestamp_ms - 1,
                                                r.end_timestamp_ms, r.end_timestamp_ms + 1)}
        positions.update(data.draw(st.lists(st.integers(0, top), max_size=3)))
        offsets.update(data.draw(st.lists(st.integers(0, top_message), max_size=3)))
        times.update(data.draw(st.lists(st.integers(9_000, top_time), max_size=3)))

        async def go() -> None:
            for position in sorted(p for p in positions if p >= 0):
                assert await self.md.find_by_base_offset(ft, position) == f.by_base(position)
                assert [r async for r in self.md.records(ft, from_base_offset=position)] == \
                    [r for r in f.live if end_of(r) > position], position
            for offset in sorted(o for o in offsets if o >= 0):
                assert await self.md.find_by_message_offset(ft, offset) == f.by_message(offset)
            for timestamp in sorted(times):
                assert await self.md.find_by_time(ft, timestamp) == f.by_time(timestamp)

        self.run(go())

    @rule(claim=st.booleans(), page_size=st.integers(1, 5))
    def reopen(self, claim: bool, page_size: int) -> None:
        """Open again; the page size a queue was created with stays (if it was)."""
        self.old = None
        if self.version == 0:
            self.page_size = page_size  # still a new queue: the new size applies
        self.md = self.run(self.open(claim=claim, page_size=page_size))

    @rule(page_size=st.integers(1, 5))
    def second_writer(self, page_size: int) -> None:
        """A second writer claims the queue; the first is not told."""
        if self.version == 0:
            self.page_size = page_size  # the claim creates the queue with its size
        self.old = self.md
        self.md = self.run(self.open(claim=True, page_size=page_size))

    @precondition(lambda self: self.old is not None)
    @rule(ft=file_types, batch_shapes=st.lists(shapes, min_size=1, max_size=3),
          how=st.sampled_from(["append", "properties", "claim"]))
    def replaced_writer_is_fenced(self, ft: FileType, batch_shapes: list[Shape],
                                  how: str) -> None:
        old = self.old
        assert old is not None
        with pytest.raises(MetadataFenced):
            if how == "append":
                # In order for the old writer too: it knows a prefix of the records.
                self.strays = True  # it may write a page before its head is refused
                self.run(old.append_many(self.batch(ft, batch_shapes)))
            elif how == "properties":
                self.run(old.set_properties(fenced=str(self.version)))
            else:
                self.run(old.claim())
        assert old.fenced

    @precondition(lambda self: self.version > 0)
    @rule(keep=st.booleans())
    def read_only_view(self, keep: bool) -> None:
        async def go() -> QueueMetadata:
            reader = await QueueMetadata.open_read_only(self.bucket, QUEUE,
                                                        cache_pages=self.cache_pages)
            await self.check(reader)
            assert reader.read_only
            with pytest.raises(MetadataReadOnly):
                await reader.set_properties(a="x")
            return reader

        reader = self.run(go())
        if keep:
            self.read_only = reader

    @precondition(lambda self: self.read_only is not None)
    @rule()
    def refresh_read_only_view(self) -> None:
        """A read-only view kept from earlier moves on to the newest head."""
        assert self.read_only is not None
        self.run(self.read_only.refresh())
        self.run(self.check(self.read_only))

    @precondition(lambda self: self.version == 0)
    @rule()
    def no_head_to_read_yet(self) -> None:
        with pytest.raises(MetadataNotFound):
            self.run(QueueMetadata.open_read_only(self.bucket, QUEUE))

    @precondition(lambda self: self.version > 0)
    @rule(unreferenced=st.booleans())
    def vacuum(self, unreferenced: bool) -> None:
        self.run(self.md.vacuum(unreferenced=unreferenced, unreferenced_age=0))
        if unreferenced:
            self.wrote()  # it claims the queue first


MetadataModel.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestMetadataModel = pytest.mark.filterwarnings("error::ResourceWarning")(MetadataModel.TestCase)
