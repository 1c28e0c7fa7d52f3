"""Commit records: what a version 2 data entry commits besides its pieces.

A record names one proposal of its writer (docs/opening.md): a head version,
a chunk of a generation, the roll of a file type's active segment, or the
times maintenance needs without the head. Bytes in docs/log-objects.md,
"Version 2"; the rules that fold them into a queue's committed state in
:mod:`tieredstore.log.commit.state`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.filetype import FileType
from tieredstore.log.errors import LogCorrupt
from tieredstore.log.format import pack_topic, unpack_topic

_COUNT = struct.Struct(">I")
_KIND = struct.Struct(">B")
_QUEUE = struct.Struct(">I")
_HEAD = struct.Struct(">QI")
_CHUNK = struct.Struct(">BQQQQI")
_ROLL = struct.Struct(">BQ")
_TIMES = struct.Struct(">qqI")


@dataclass(frozen=True, slots=True)
class HeadCommit:
    """Head version ``version`` of the queue, whose bytes have ``crc32c``."""

    topic: str
    queue_id: int
    version: int
    crc32c: int


@dataclass(frozen=True, slots=True)
class ChunkCommit:
    """Chunk ``[position, position + length)`` of segment ``segment_base``,
    written by generation ``generation``."""

    topic: str
    queue_id: int
    file_type: FileType
    segment_base: int
    position: int
    length: int
    generation: int
    crc32c: int

    @property
    def end(self) -> int:
        return self.position + self.length


@dataclass(frozen=True, slots=True)
class RollCommit:
    """The file type's active segment is now the empty one at ``segment_base``."""

    topic: str
    queue_id: int
    file_type: FileType
    segment_base: int


@dataclass(frozen=True, slots=True)
class TimesCommit:
    """What maintenance needs without the head: the oldest live record's end
    time, the active segment's first message time (ms), merges owed."""

    topic: str
    queue_id: int
    oldest_end_ms: int
    active_first_ms: int
    merges_owed: int


CommitRecord = HeadCommit | ChunkCommit | RollCommit | TimesCommit

_KINDS: dict[type[CommitRecord], int] = {HeadCommit: 1, ChunkCommit: 2, RollCommit: 3,
                                         TimesCommit: 4}


def _body(record: CommitRecord) -> bytes:
    match record:
        case HeadCommit():
            return _HEAD.pack(record.version, record.crc32c)
        case ChunkCommit():
            if record.length <= 0:
                raise ValueError(f"{record} commits no bytes")
            return _CHUNK.pack(int(record.file_type), record.segment_base, record.position,
                               record.length, record.generation, record.crc32c)
        case RollCommit():
            return _ROLL.pack(int(record.file_type), record.segment_base)
        case TimesCommit():
            return _TIMES.pack(record.oldest_end_ms, record.active_first_ms,
                               record.merges_owed)


def encode_records(records: Sequence[CommitRecord]) -> bytes:
    """``record_count u32`` and the records, as a version 2 index ends; nothing
    for no records (the entry is then written as version 1)."""
    if not records:
        return b""
    out = [_COUNT.pack(len(records))]
    for record in records:
        out += [_KIND.pack(_KINDS[type(record)]), pack_topic(record.topic, record.queue_id),
                _QUEUE.pack(record.queue_id), _body(record)]
    return b"".join(out)


def decode_records(view: memoryview, *, key: str) -> list[CommitRecord]:
    """The records :func:`encode_records` wrote, filling ``view`` exactly."""
    records: list[CommitRecord] = []
    try:
        (count,) = _COUNT.unpack_from(view, 0)
        at = _COUNT.size
        for _ in range(count):
            (kind,) = _KIND.unpack_from(view, at)
            topic, at = unpack_topic(view, at + _KIND.size)
            (queue,) = _QUEUE.unpack_from(view, at)
            at += _QUEUE.size
            record, at = _decode_body(kind, topic, queue, view, at)
            records.append(record)
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise LogCorrupt(key, f"commit records are malformed: {exc}") from None
    if at != len(view):
        raise LogCorrupt(key, f"index holds {len(view) - at} bytes past its last record")
    return records


def _decode_body(kind: int, topic: str, queue: int, view: memoryview, at: int
                 ) -> tuple[CommitRecord, int]:
    if kind == 1:
        version, crc = _HEAD.unpack_from(view, at)
        return HeadCommit(topic, queue, version, crc), at + _HEAD.size
    if kind == 2:
        file_type, base, position, length, generation, crc = _CHUNK.unpack_from(view, at)
        if length == 0:
            raise ValueError("a chunk record of no bytes")
        return (ChunkCommit(topic, queue, FileType(file_type), base, position, length,
                            generation, crc), at + _CHUNK.size)
    if kind == 3:
        file_type, base = _ROLL.unpack_from(view, at)
        return RollCommit(topic, queue, FileType(file_type), base), at + _ROLL.size
    if kind == 4:
        oldest, first, owed = _TIMES.unpack_from(view, at)
        return TimesCommit(topic, queue, oldest, first, owed), at + _TIMES.size
    raise ValueError(f"record kind {kind} is unknown")
