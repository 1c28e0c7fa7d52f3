"""Bytes of heads and pages, and the rules a record must keep. No IO.

A head or page object is a 4-byte magic, the CRC32C of the payload (4 bytes,
big-endian), then the protobuf payload. Protobuf alone would accept many a
damaged buffer as some other valid message; the checksum makes damage an error.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable, Sequence
from typing import TypeVar

from google.protobuf.message import Message

import tieredstore.metadata.metadata_pb2 as pb
from tieredstore.checksum import crc32c
from tieredstore.filetype import FileType
from tieredstore.metadata.errors import CorruptMetadata, RecordOrderError
from tieredstore.metadata.keys import PageRef, QueuePath, check_file_type, pb_type

FORMAT_VERSION = 1
HEAD_MAGIC = b"TQH1"
PAGE_MAGIC = b"TQP1"
_FRAME = struct.Struct(">4sI")


def frame(magic: bytes, payload: bytes) -> bytes:
    return _FRAME.pack(magic, crc32c(payload)) + payload


def unframe(magic: bytes, data: bytes, key: str,
            corrupt: Callable[[str], Exception] = CorruptMetadata) -> bytes:
    """The payload of a framed object, or ``corrupt`` (``CorruptMetadata``) naming ``key``."""
    if len(data) < _FRAME.size:
        raise corrupt(f"{key}: {len(data)} bytes, shorter than a frame header")
    found, checksum = _FRAME.unpack_from(data)
    if found != magic:
        raise corrupt(f"{key}: magic {found!r}, expected {magic!r}")
    payload = data[_FRAME.size :]
    if crc32c(payload) != checksum:
        raise corrupt(f"{key}: CRC32C mismatch")
    return payload


Framed = TypeVar("Framed", bound=Message)


def parse_framed(message: Framed, magic: bytes, data: bytes, key: str, *,
                 version_field: str = "format_version", version: int = FORMAT_VERSION,
                 corrupt: Callable[[str], Exception] = CorruptMetadata) -> Framed:
    """``message`` parsed from the framed object read from ``key``, its format
    version (field ``version_field``) checked to be ``version``: ``corrupt``
    (``CorruptMetadata``) naming ``key`` for anything else."""
    payload = unframe(magic, data, key, corrupt)
    try:
        message.ParseFromString(payload)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise corrupt(f"{key}: not a {type(message).__name__}: {exc}") from exc
    found = getattr(message, version_field)
    if found != version:
        raise corrupt(f"{key}: format version {found}; this library reads {version}")
    return message


# --- heads ------------------------------------------------------------------


def stamp_head(head: pb.QueueHead, version: int, writer_id: str, session_id: str,
               written_at_ms: int) -> None:
    """Set who wrote ``head`` as ``version``, and when."""
    head.format_version, head.version, head.writer_id = FORMAT_VERSION, version, writer_id
    head.session_id, head.written_at_ms = session_id, written_at_ms


def encode_head(head: pb.QueueHead) -> bytes:
    return frame(HEAD_MAGIC, head.SerializeToString(deterministic=True))


def decode_head(data: bytes, key: str, version: int) -> pb.QueueHead:
    """Parse and check a head read from ``key``, which names ``version``."""
    head = parse_framed(pb.QueueHead(), HEAD_MAGIC, data, key)
    if head.version != version:
        raise CorruptMetadata(f"{key}: holds version {head.version}")
    if head.page_size < 1:
        raise CorruptMetadata(f"{key}: page size {head.page_size}")
    seen: set[int] = set()
    for state in head.files:
        if state.file_type in seen:
            raise CorruptMetadata(f"{key}: two states for file type {state.file_type}")
        seen.add(state.file_type)
    return head


# --- pages ------------------------------------------------------------------


def encode_page(file_type: FileType, records: Sequence[pb.SegmentRecord]) -> bytes:
    page = pb.MetadataPage(format_version=FORMAT_VERSION, file_type=pb_type(file_type),
                           records=records)
    return frame(PAGE_MAGIC, page.SerializeToString(deterministic=True))


def page_hash(data: bytes) -> int:
    """The 64-bit digest of a page's bytes that its key carries (never 0: 0 is
    'no page')."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") or 1


def build_page(
    queue: QueuePath,
    file_type: FileType,
    records: Sequence[pb.SegmentRecord],
    prev_hash: int,
) -> tuple[PageRef, bytes]:
    """The key and bytes of a page of ``records`` that follows page ``prev_hash``."""
    data = encode_page(file_type, records)
    return queue.page_ref(file_type, records, page_hash(data), prev_hash), data


def decode_page(data: bytes, file_type: FileType, ref: PageRef) -> list[pb.SegmentRecord]:
    """The records of a page read from ``ref.key``, checked against the key."""
    page = parse_framed(pb.MetadataPage(), PAGE_MAGIC, data, ref.key)
    if page_hash(data) != ref.page_hash:
        raise CorruptMetadata(f"{ref.key}: bytes do not match the hash in the key")
    records = list(page.records)
    if page.file_type != pb_type(file_type):
        raise CorruptMetadata(f"{ref.key}: holds file type {page.file_type}")
    if (
        not records
        or len(records) != ref.record_count
        or records[0].base_offset != ref.first_base_offset
        or record_end(records[-1]) != ref.end_offset
        or records[0].first_message_offset != ref.first_message_offset
        or max(r.end_timestamp_ms for r in records) != ref.max_end_timestamp_ms
    ):
        raise CorruptMetadata(f"{ref.key}: records do not match the key")
    return records


# --- records ----------------------------------------------------------------


def record_end(record: pb.SegmentRecord) -> int:
    """The exclusive end of the record's segment in its flat file."""
    return record.base_offset + record.size


def check_record(record: pb.SegmentRecord) -> None:
    """Refuse a record that is malformed on its own."""
    try:
        check_file_type(record.file_type)
    except ValueError as exc:
        raise RecordOrderError(str(exc)) from None
    if record.size < 1:
        raise RecordOrderError(f"record at base offset {record.base_offset} has size 0")
    if record.message_count < 1:
        raise RecordOrderError(f"record at base offset {record.base_offset} has no messages")
    if record.last_message_offset < record.first_message_offset:
        raise RecordOrderError(
            f"record at base offset {record.base_offset}: last message offset "
            f"{record.last_message_offset} < first {record.first_message_offset}"
        )
    if not 0 <= record.begin_timestamp_ms <= record.end_timestamp_ms:
        raise RecordOrderError(
            f"record at base offset {record.base_offset}: timestamps "
            f"[{record.begin_timestamp_ms}, {record.end_timestamp_ms}] not ascending from 0"
        )
    if record.HasField("min_timestamp_ms") and not (
            0 <= record.min_timestamp_ms <= record.begin_timestamp_ms):
        raise RecordOrderError(
            f"record at base offset {record.base_offset}: smallest timestamp "
            f"{record.min_timestamp_ms} not in [0, {record.begin_timestamp_ms}]"
        )


def check_follows(last: pb.SegmentRecord, record: pb.SegmentRecord) -> None:
    """Refuse a record that does not come after ``last`` in both offset spaces.
    A key-index record may start at the offset the last one ends at: one
    message's entries (one per key) may straddle the roll between them
    (docs/records.md, "Key index")."""
    if record.base_offset < record_end(last):
        raise RecordOrderError(
            f"record at base offset {record.base_offset} overlaps or precedes the last one, "
            f"which ends at {record_end(last)}"
        )
    straddles = record.file_type == pb_type(FileType.INDEX)
    if record.first_message_offset < last.last_message_offset + (0 if straddles else 1):
        raise RecordOrderError(
            f"record's first message offset {record.first_message_offset} is not after the "
            f"last one's {last.last_message_offset}"
        )
