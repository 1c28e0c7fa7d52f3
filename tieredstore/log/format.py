"""A log object's bytes: a header, the pieces, an index of them and a footer.

One log object holds the bytes a group commit took from every queue. Layout
(integers big-endian; see docs/log-objects.md, "Log objects")::

    "TSLG" | version u16 = 1 | reserved u16
    pieces, back to back
    index:  piece_count x (topic_len u16 | topic | queue u32 | file_type u8 |
                           segment_base u64 | position u64 | length u32 |
                           object_offset u64 | crc32c u32)
    footer: "TSLF" | version u16 = 1 | reserved u16 | index_offset u64 |
            index_length u32 | piece_count u32 | index crc32c u32 |
            footer crc32c u32 (of the 28 bytes before it)

The footer is fixed-size, so a reader finds the index with one ranged GET of
the object's tail (:data:`TAIL_READ` bytes) and a second only when the index
is longer than that.

Version 2 (docs/log-objects.md, "Version 2") keeps this frame: the reserved
field holds the entry's kind (:data:`DATA`, :data:`CHECKPOINT`), a data
entry's index goes on with its commit records
(:mod:`tieredstore.log.commit.records`), and a checkpoint's data and index are
those of :mod:`tieredstore.log.commit.checkpoint`. An entry with neither records nor
a checkpoint is written as version 1.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from tieredstore.checksum import crc32c
from tieredstore.filetype import FileType
from tieredstore.log.errors import LogCorrupt
from tieredstore.segment.layout import ChunkRef
from tieredstore.sizes import KiB

MAGIC = b"TSLG"
FOOTER_MAGIC = b"TSLF"
VERSION = 1
VERSION_2 = 2
DATA = 0
CHECKPOINT = 1
_HEADER = struct.Struct(">4sHH")
_TOPIC_LEN = struct.Struct(">H")
_ENTRY = struct.Struct(">IBQQIQI")  # queue, file type, segment base, position, length,
#                                     object offset, crc32c
_FOOTER_HEAD = struct.Struct(">4sHHQIII")
_FOOTER = struct.Struct(">28sI")
HEADER_SIZE = _HEADER.size  # 8
FOOTER_SIZE = _FOOTER.size  # 32
TAIL_READ = 64 * KiB
MAX_TOPIC_BYTES = 0xFFFF
MAX_QUEUE_ID = 0xFFFF_FFFF  # an index entry's queue u32: the narrowest field a queue id has
MAX_PIECE_LENGTH = 0xFFFF_FFFF  # an index entry's length u32


@dataclass(frozen=True, slots=True)
class Piece:
    """Bytes ``[position, position + length)`` of one segment, at ``object_offset``
    in a log object, with their CRC32C."""

    topic: str
    queue_id: int
    file_type: FileType
    segment_base: int
    position: int
    length: int
    object_offset: int = 0
    crc32c: int = 0

    @property
    def end(self) -> int:
        return self.position + self.length

    @property
    def segment(self) -> tuple[str, int, FileType, int]:
        """Which segment the piece belongs to."""
        return self.topic, self.queue_id, self.file_type, self.segment_base

    def unit(self, key: str) -> ChunkRef:
        """The piece as a unit of its segment's layout, stored in log object ``key``."""
        return ChunkRef(self.position, self.length, key, self.object_offset, self.crc32c)


@dataclass(frozen=True, slots=True)
class LogFooter:
    index_offset: int
    index_length: int
    piece_count: int
    index_crc: int
    version: int = VERSION
    kind: int = DATA


def encode_log_object(pieces: Sequence[tuple[Piece, bytes | memoryview]],
                      records: bytes = b"") -> tuple[bytes, list[Piece]]:
    """The object holding each ``(piece, data)`` (``piece``'s offset and CRC are
    filled in here), and the pieces as stored. ``records``: encoded commit
    records (:func:`tieredstore.log.commit.records.encode_records`); with any, the
    object is a version 2 data entry."""
    version = VERSION_2 if records else VERSION
    parts: list[bytes | memoryview] = [_HEADER.pack(MAGIC, version, DATA)]
    offset = HEADER_SIZE
    stored: list[Piece] = []
    for piece, data in pieces:
        if len(data) != piece.length:
            raise ValueError(f"piece {piece} is given {len(data)} bytes")
        placed = Piece(piece.topic, piece.queue_id, FileType(piece.file_type),
                       piece.segment_base, piece.position, piece.length, offset, crc32c(data))
        stored.append(placed)
        parts.append(data)
        offset += len(data)
    parts += frame_index(encode_index(stored) + records, offset, len(stored), version, DATA)
    return b"".join(parts), stored


def frame_index(index: bytes, index_offset: int, piece_count: int, version: int,
                kind: int) -> list[bytes]:
    """An object's index and footer, for data ending at ``index_offset``."""
    head = _FOOTER_HEAD.pack(FOOTER_MAGIC, version, kind, index_offset, len(index),
                             piece_count, crc32c(index))
    return [index, _FOOTER.pack(head, crc32c(head))]


def header(version: int, kind: int) -> bytes:
    return _HEADER.pack(MAGIC, version, kind)


def check_indexable(topic: str, queue_id: int) -> bytes:
    """The topic in UTF-8, once ``topic`` and ``queue_id`` are known to fit an
    index entry (else a ValueError naming the one that does not)."""
    data = topic.encode()
    if len(data) > MAX_TOPIC_BYTES:
        raise ValueError(f"topic of {len(data)} bytes does not fit a log index (at most "
                         f"{MAX_TOPIC_BYTES})")
    if not 0 <= queue_id <= MAX_QUEUE_ID:
        raise ValueError(f"queue id {queue_id} does not fit a log index: it must be in "
                         f"[0, {MAX_QUEUE_ID}]")
    return data


def pack_topic(topic: str, queue_id: int) -> bytes:
    """``topic_len u16 | topic``, the start of every index entry naming a queue
    (the queue id ``u32`` is packed by the entry after it)."""
    data = check_indexable(topic, queue_id)
    return _TOPIC_LEN.pack(len(data)) + data


def unpack_topic(view: memoryview, at: int) -> tuple[str, int]:
    """The topic :func:`pack_topic` wrote at ``at``, and where it ends."""
    (n,) = _TOPIC_LEN.unpack_from(view, at)
    if at + 2 + n > len(view):
        raise ValueError(f"a topic of {n} bytes runs past the index")
    return str(view[at + 2 : at + 2 + n], "utf-8"), at + 2 + n


def encode_index(pieces: Sequence[Piece]) -> bytes:
    out: list[bytes] = []
    for p in pieces:
        out += [pack_topic(p.topic, p.queue_id),
                _ENTRY.pack(p.queue_id, int(p.file_type), p.segment_base, p.position,
                            p.length, p.object_offset, p.crc32c)]
    return b"".join(out)


def decode_footer(tail: bytes | memoryview, *, key: str, size: int) -> LogFooter:
    """The footer from the last bytes of an object of ``size`` bytes, checked."""
    if size < HEADER_SIZE + FOOTER_SIZE or len(tail) < FOOTER_SIZE:
        raise LogCorrupt(key, f"{size} bytes is too short for a log object")
    head, footer_crc = _FOOTER.unpack_from(tail, len(tail) - FOOTER_SIZE)
    magic, version, kind, index_offset, index_length, count, index_crc = \
        _FOOTER_HEAD.unpack(head)
    if magic != FOOTER_MAGIC:
        raise LogCorrupt(key, f"footer magic {magic!r}, not {FOOTER_MAGIC!r}")
    if crc32c(head) != footer_crc:
        raise LogCorrupt(key, "footer fails its CRC32C")
    if version not in (VERSION, VERSION_2):
        raise LogCorrupt(key, f"format version {version} is unknown")
    if version == VERSION:
        kind = DATA
    elif kind not in (DATA, CHECKPOINT):
        raise LogCorrupt(key, f"entry kind {kind} is unknown")
    if index_offset < HEADER_SIZE or index_offset + index_length + FOOTER_SIZE != size:
        raise LogCorrupt(key, f"index [{index_offset}, +{index_length}) does not end at the "
                              f"footer of a {size}-byte object")
    return LogFooter(index_offset, index_length, count, index_crc, version, kind)


def check_index(index: bytes | memoryview, footer: LogFooter, *, key: str) -> memoryview:
    """``index`` once its length and CRC are the footer's."""
    if len(index) != footer.index_length or crc32c(index) != footer.index_crc:
        raise LogCorrupt(key, "index fails its CRC32C")
    return memoryview(index)


def decode_pieces(view: memoryview, footer: LogFooter, *, key: str) -> tuple[list[Piece], int]:
    """The pieces a data entry's index lists, each checked to lie inside the
    data, and where in the index they end."""
    pieces: list[Piece] = []
    at = 0
    try:
        for _ in range(footer.piece_count):
            topic, at = unpack_topic(view, at)
            queue, file_type, base, position, length, offset, crc = _ENTRY.unpack_from(view, at)
            at += _ENTRY.size
            pieces.append(Piece(topic, queue, FileType(file_type), base, position, length,
                                offset, crc))
    except (struct.error, UnicodeDecodeError, ValueError) as exc:
        raise LogCorrupt(key, f"index is malformed: {exc}") from None
    for piece in pieces:
        if piece.object_offset < HEADER_SIZE or \
                piece.object_offset + piece.length > footer.index_offset:
            raise LogCorrupt(key, f"piece {piece} lies outside the object's data")
    return pieces, at

