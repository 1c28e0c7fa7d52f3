"""Message records (commit log) and consume-queue units: the store's byte formats.

Both are documented in ``docs/format.md``; all integers big-endian.

A commit-log record::

    total_size   u32   bytes of the whole record, this field included
    magic        u32   0x54534D31 ("TSM1")
    crc32c       u32   over every byte after this field
    queue_offset u64
    store_ts     i64   milliseconds since the epoch
    flags        u32   0 (reserved)
    tags         u16 length + UTF-8      (length 0xFFFF means "no tags")
    keys         u16 count, each u16 length + UTF-8
    properties   u16 count, each u16 key length + UTF-8, u32 value length + UTF-8
    body         u32 length + bytes

A consume-queue unit, 32 bytes::

    commit_log_position u64, record_size u32, tags_hash i64, store_ts i64, crc32c u32
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tieredstore.checksum import crc32c
from tieredstore.errors import TieredStoreError

MAGIC = 0x54534D31
NO_TAGS = 0xFFFF
_HEAD = struct.Struct(">III")  # total_size, magic, crc
_FIXED = struct.Struct(">QqI")  # queue_offset, store_ts, flags
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
HEAD_SIZE = _HEAD.size
MIN_RECORD_SIZE = _HEAD.size + _FIXED.size + 2 + 2 + 2 + 4

_UNIT = struct.Struct(">QIqq")
_UNIT_CRC = struct.Struct(">I")
UNIT_SIZE = _UNIT.size + _UNIT_CRC.size  # 32


class RecordError(TieredStoreError, ValueError):
    """Bytes that should hold a record or unit do not: corrupt or misplaced."""


@dataclass(frozen=True, slots=True)
class Message:
    """One stored message, as ``get`` returns it."""

    topic: str
    queue_id: int
    offset: int
    body: bytes
    store_timestamp: int
    keys: tuple[str, ...] = ()
    tags: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)


def tags_hash(tags: str | None) -> int:
    """A stable 63-bit hash of the tags (for filtering by tag without the record)."""
    if not tags:
        return 0
    data = tags.encode()
    return ((crc32c(data) << 32) | crc32c(data[::-1])) & 0x7FFF_FFFF_FFFF_FFFF


def _str16(text: str, what: str) -> bytes:
    data = text.encode()
    if len(data) >= NO_TAGS:
        raise RecordError(f"{what} is {len(data)} bytes in UTF-8; at most {NO_TAGS - 1}")
    return _U16.pack(len(data)) + data


def encode_record(
    queue_offset: int,
    store_timestamp: int,
    body: bytes | memoryview,
    *,
    keys: Sequence[str] = (),
    tags: str | None = None,
    properties: Mapping[str, str] | None = None,
) -> bytes:
    """One commit-log record. Joins its pieces once."""
    props = properties or {}
    if len(keys) >= NO_TAGS or len(props) >= NO_TAGS:
        raise RecordError(f"too many keys ({len(keys)}) or properties ({len(props)})")
    parts: list[bytes | memoryview] = [
        b"",  # head, filled below
        _FIXED.pack(queue_offset, store_timestamp, 0),
        _U16.pack(NO_TAGS) if tags is None else _str16(tags, "tags"),
        _U16.pack(len(keys)),
        *(_str16(k, "a key") for k in keys),
        _U16.pack(len(props)),
    ]
    for name, value in props.items():
        encoded = value.encode()
        parts += [_str16(name, "a property name"), _U32.pack(len(encoded)), encoded]
    parts += [_U32.pack(len(body)), body]
    total = _HEAD.size + sum(len(p) for p in parts)
    crc = 0
    for part in parts[1:]:
        crc = crc32c(part, crc)
    parts[0] = _HEAD.pack(total, MAGIC, crc)
    return b"".join(parts)


def record_size(head: bytes | memoryview) -> int:
    """The total size a record announces in its first 12 bytes (checked for sanity)."""
    if len(head) < _HEAD.size:
        raise RecordError(f"record head is {len(head)} bytes, need {_HEAD.size}")
    total, magic, _ = _HEAD.unpack_from(head)
    if magic != MAGIC or total < MIN_RECORD_SIZE:
        raise RecordError(f"no record here: magic {magic:#x}, size {total}")
    return int(total)


def decode_record(data: bytes | memoryview, topic: str, queue_id: int) -> Message:
    """Parse and check one record occupying all of ``data``."""
    view = memoryview(data)
    total = record_size(view)
    if total != len(view):
        raise RecordError(f"record says {total} bytes, {len(view)} given")
    _, _, crc = _HEAD.unpack_from(view)
    if crc32c(view[_HEAD.size :]) != crc:
        raise RecordError("record fails its CRC32C")
    queue_offset, store_ts, _flags = _FIXED.unpack_from(view, _HEAD.size)
    pos = _HEAD.size + _FIXED.size

    def str16() -> str:
        nonlocal pos
        (n,) = _U16.unpack_from(view, pos)
        pos += 2
        text = bytes(view[pos : pos + n]).decode()
        pos += n
        return text

    try:
        (tag_len,) = _U16.unpack_from(view, pos)
        tags: str | None
        if tag_len == NO_TAGS:
            pos += 2
            tags = None
        else:
            tags = str16()
        (n_keys,) = _U16.unpack_from(view, pos)
        pos += 2
        keys = tuple(str16() for _ in range(n_keys))
        (n_props,) = _U16.unpack_from(view, pos)
        pos += 2
        props: dict[str, str] = {}
        for _ in range(n_props):
            name = str16()
            (n,) = _U32.unpack_from(view, pos)
            pos += 4
            props[name] = bytes(view[pos : pos + n]).decode()
            pos += n
        (n_body,) = _U32.unpack_from(view, pos)
        pos += 4
        body = bytes(view[pos : pos + n_body])
        pos += n_body
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordError(f"record fields are malformed: {exc}") from None
    if pos != total:
        raise RecordError(f"record fields end at {pos}, record at {total}")
    return Message(topic, queue_id, int(queue_offset), body, int(store_ts), keys, tags, props)


@dataclass(frozen=True, slots=True)
class CqUnit:
    """Where message ``offset``'s record is: a consume-queue unit."""

    position: int  # in the queue's commit-log flat file
    size: int
    tags_hash: int
    store_timestamp: int

    @property
    def end(self) -> int:
        return self.position + self.size


def encode_unit(unit: CqUnit) -> bytes:
    body = _UNIT.pack(unit.position, unit.size, unit.tags_hash, unit.store_timestamp)
    return body + _UNIT_CRC.pack(crc32c(body))


def decode_unit(data: bytes | memoryview, offset: int = 0) -> CqUnit:
    """The unit at ``data[offset:offset+32]``, its CRC checked."""
    view = memoryview(data)[offset : offset + UNIT_SIZE]
    if len(view) != UNIT_SIZE:
        raise RecordError(f"consume-queue unit is {len(view)} bytes, need {UNIT_SIZE}")
    (crc,) = _UNIT_CRC.unpack_from(view, _UNIT.size)
    if crc32c(view[: _UNIT.size]) != crc:
        raise RecordError("consume-queue unit fails its CRC32C")
    position, size, tag_hash, ts = _UNIT.unpack_from(view)
    return CqUnit(int(position), int(size), int(tag_hash), int(ts))
