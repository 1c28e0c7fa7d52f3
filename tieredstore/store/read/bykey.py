"""Looking messages up by key: the key index names candidates, the commit log
confirms them (docs/records.md, *Key index*).

The index's entries carry each record's commit-log position and size, so a
lookup reads no consume queue: it reads the candidates' records, newest
first, with one ranged GET per run of neighbours (records of one segment
within :data:`RUN_GAP` bytes of each other), decodes each (its CRC32C) and
keeps it if its offset is the entry's, its keys hold the key and its
timestamp is in the range. A hash shared with another key costs a read,
never a wrong answer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tieredstore.errors import (
    IntegrityError,
    InvalidRequest,
    ObjectNotFound,
    TieredStoreError,
)
from tieredstore.metadata import QueueMetadata, SegmentRecord
from tieredstore.objectstore.base import ByteRange
from tieredstore.segment import FileType
from tieredstore.segment.path import SLOTS_NAME
from tieredstore.segment.reader import ReadMode
from tieredstore.store.formats.keyentries import (
    KeyEntry,
    check_items,
    decode_entries,
    directory_range,
    has_key,
    items_range,
    key_hash,
    parse_directory,
    slot_count,
    slot_of,
)
from tieredstore.store.formats.record import Message, RecordError, RecordOpener, decode_record
from tieredstore.store.read.flatreader import FlatReader


class KeyedQueue(Protocol):
    """What a lookup reads of a queue (:class:`~tieredstore.store.read.reading.QueueReading`)."""

    topic: str
    queue_id: int
    cl: FlatReader[Any]
    codec: RecordOpener | None

    @property
    def min_offset(self) -> int: ...

    async def commit_log_segment_end(self, position: int) -> int: ...

log = logging.getLogger(__name__)

RUN_GAP = 64 * 1024  # bytes between two candidates' records read in one GET


@dataclass(frozen=True, slots=True)
class KeyQuery:
    """What a lookup asks for: messages with ``key`` stamped in ``[begin_ms,
    end_ms]``, the newest ``max_count``."""

    key: str
    begin_ms: int
    end_ms: int
    max_count: int
    hash: int = field(init=False)  # the key's, as the index has it

    def __post_init__(self) -> None:
        object.__setattr__(self, "hash", key_hash(self.key))

    def in_range(self, timestamp: int) -> bool:
        return self.begin_ms <= timestamp <= self.end_ms


async def find_entries(meta: QueueMetadata, index: FlatReader[Any], q: KeyQuery
                       ) -> list[KeyEntry]:
    """Entries of the key's hash stamped in the range: from the slot objects of
    the sealed segments whose time range meets it, and the unrecorded segments
    read whole (a hash may be another key's: :func:`query` checks).

    The unrecorded segments are taken first: one that rolls later is recorded,
    and the records then skipped from its base on, so every segment is read
    once. (Records first, a roll in between left one segment in neither.)"""
    unrecorded = await index.unrecorded()
    recorded_end = unrecorded[0][0] if unrecorded else None
    found: list[KeyEntry] = []
    async for record in meta.records(FileType.INDEX):
        if recorded_end is not None and record.base_offset >= recorded_end:
            break
        if _may_hold(record, q):
            found.extend(await _in_sealed(index, record, q.hash))
    for start, end in unrecorded:
        found.extend(e for e in decode_entries(await index.read(start, end - start))
                     if e.key_hash == q.hash)
    return [e for e in found if q.in_range(e.store_timestamp)]


def _may_hold(record: SegmentRecord, q: KeyQuery) -> bool:
    """Whether a sealed segment may hold entries stamped in the query's range.
    Timestamps come in any order: only a record with ``min_timestamp_ms`` bounds
    them (by it and ``end_timestamp_ms``); one without is always read."""
    if not record.HasField("min_timestamp_ms"):
        return True
    return record.min_timestamp_ms <= q.end_ms and record.end_timestamp_ms >= q.begin_ms


async def _in_sealed(index: FlatReader[Any], record: SegmentRecord, wanted: int
                     ) -> list[KeyEntry]:
    """A sealed segment's entries of hash ``wanted``: two ranged GETs of its
    slot object, or the whole segment if it has none (yet) or it is damaged."""
    key, store = index.path_of(record.base_offset).base_dir + SLOTS_NAME, index.store
    slots = slot_count(record.size)
    try:
        first, end, crc = parse_directory(bytes(await store.get(
            key, ByteRange(*directory_range(slot_of(wanted, slots))))))
        if end == first:
            return []
        items = check_items(bytes(await store.get(key, ByteRange(*items_range(slots, first, end)))),
                            end - first, crc)
        return [e for e in items if e.key_hash == wanted]
    except ObjectNotFound:
        pass
    except (IntegrityError, InvalidRequest) as exc:
        log.warning("slot object %s is damaged, reading the index segment instead: %s",
                    key, exc)
    data = await index.read(record.base_offset, record.size)
    return [e for e in decode_entries(data) if e.key_hash == wanted]


async def query(queue: KeyedQueue, entries: list[KeyEntry], q: KeyQuery
                ) -> list[Message]:
    """The newest ``q.max_count`` messages of ``queue`` among ``entries`` that
    hold the key and are stamped in the range, newest first."""
    first = queue.min_offset
    # The same entry may be there twice (re-derived after a crash); entries that
    # disagree on where an offset's record is are each checked against it.
    unique = {(e.offset, e.position): e for e in entries if e.offset >= first}
    left = sorted(unique.values(), key=lambda e: e.offset, reverse=True)
    found: dict[int, Message] = {}
    while left and len(found) < q.max_count:
        wanted = q.max_count - len(found)
        batch, left = left[:wanted], left[wanted:]
        for message in await _confirm(queue, sorted(batch, key=lambda e: e.position), q):
            found[message.offset] = message
    return sorted(found.values(), key=lambda m: m.offset, reverse=True)[:q.max_count]


def newest(answers: Iterable[list[Message]], max_count: int) -> list[Message]:
    """The newest ``max_count`` messages of several queues' answers, oldest first."""
    found = [m for answer in answers for m in answer]
    found.sort(key=lambda m: (m.store_timestamp, m.queue_id, m.offset))
    return found[-max_count:]


async def _confirm(queue: KeyedQueue, entries: list[KeyEntry], q: KeyQuery
                   ) -> list[Message]:
    """The records of ``entries`` (in position order) that hold the key."""
    out: list[Message] = []
    spans = [(e.position, e.size) for e in entries]
    i = 0
    while i < len(entries):
        try:
            j, end = _run_end(spans, i, await queue.commit_log_segment_end(entries[i].position))
            start = entries[i].position
            data = memoryview(await queue.cl.read(start, end - start, mode=ReadMode.SPAN))
        except TieredStoreError as exc:
            log.warning("%s/%d: a key lookup skips the record at commit-log byte %d: %s",
                        queue.topic, queue.queue_id, entries[i].position, exc)
            i += 1
            continue
        for entry in entries[i:j + 1]:
            at = entry.position - start
            try:
                message = decode_record(data[at:at + entry.size], queue.topic, queue.queue_id,
                                        queue.codec)
            except RecordError as exc:
                log.warning("%s/%d: a key lookup skips offset %d: %s", queue.topic,
                            queue.queue_id, entry.offset, exc)
                continue
            if (message.offset == entry.offset and has_key(message, q.key)
                    and q.in_range(message.store_timestamp)):
                out.append(message)
        i = j + 1
    return out


def _run_end(spans: Sequence[tuple[int, int]], i: int, limit: int) -> tuple[int, int]:
    """From ``spans[i]`` (``(position, size)`` records in position order), the
    index of the last span of the run one read takes, and where that read ends:
    each next span starts at most :data:`RUN_GAP` bytes after the run's end
    (never before it) and ends by ``limit`` (the end of the commit-log segment
    holding ``spans[i]``)."""
    j = i
    end = spans[i][0] + spans[i][1]
    while j + 1 < len(spans):
        position, size = spans[j + 1]
        if not end <= position <= end + RUN_GAP or position + size > limit:
            break
        j += 1
        end = position + size
    return j, end
