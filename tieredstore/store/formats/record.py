"""Message records (commit log) and consume-queue units: the store's byte formats.

Both are documented in ``docs/records.md``; all integers big-endian.

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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, islice, repeat, starmap
from operator import add, itemgetter
from types import MappingProxyType
from typing import NamedTuple, Protocol

from tieredstore.checksum import crc32c
from tieredstore.errors import TieredStoreError

MAGIC = 0x54534D31
NO_TAGS = 0xFFFF
_HEAD = struct.Struct(">III")  # total_size, magic, crc
_FIXED = struct.Struct(">QqI")  # queue_offset, store_ts, flags
_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
HEAD_SIZE = _HEAD.size
TAIL_AT = _HEAD.size + _FIXED.size  # where tags, keys, properties and body begin
FLAG_ZSTD = 0x1  # the tail is compressed (tieredstore.store.formats.codec)
FLAG_AES_GCM = 0x2  # the tail is encrypted
KNOWN_FLAGS = FLAG_ZSTD | FLAG_AES_GCM
MIN_RECORD_SIZE = _HEAD.size + _FIXED.size + 2 + 2 + 2 + 4

_PREFIX = struct.Struct(">IIIQqIH")  # head, fixed fields, the tags' length: one unpack
_BARE = struct.Struct(">HHI")  # after "no tags": key count, property count, body length
_PLAIN = struct.Struct(">IIIQqIHHHI")  # a record without tags, keys or properties: all fields
_PLAIN_FIELDS = struct.Struct(">QqIHHHI")  # the same, after the head
_PLAIN_TAIL = struct.Struct(">II")  # plain_len, plain_crc32c of an unshrunk sealed tail
_UNIT = struct.Struct(">QIqq")
_UNIT_CRC = struct.Struct(">I")
_UNIT_ALL = struct.Struct(">QIqqI")
UNIT_SIZE = _UNIT.size + _UNIT_CRC.size  # 32
_UNIT_BODY = _UNIT.size
PLAIN_BODY_AT = _PLAIN.size  # where a plain record's body begins
_STAMP = itemgetter(3)  # a CqUnit's store time


class RecordError(TieredStoreError, ValueError):
    """Bytes that should hold a record or unit do not: corrupt or misplaced."""


class RecordOpener(Protocol):
    """What turns a sealed record's tail back into plain bytes (RecordCodec)."""

    def open(self, view: memoryview, flags: int) -> memoryview: ...


class Message(NamedTuple):
    """One stored message, as ``get`` returns it. Immutable (a named tuple: made
    once per message read, it costs a tenth of a frozen dataclass)."""

    topic: str
    queue_id: int
    offset: int
    body: bytes
    store_timestamp: int
    keys: tuple[str, ...] = ()
    tags: str | None = None
    properties: Mapping[str, str] = MappingProxyType({})


NO_PROPERTIES: Mapping[str, str] = Message._field_defaults["properties"]  # read-only, empty


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
    if not keys and tags is None and not properties:
        # The common record: a body and nothing else (the fields of _PLAIN).
        fields = _PLAIN_FIELDS.pack(queue_offset, store_timestamp, 0, NO_TAGS, 0, 0,
                                    len(body))
        total = _HEAD.size + len(fields) + len(body)
        return b"".join((_HEAD.pack(total, MAGIC, crc32c(body, crc32c(fields))), fields,
                         body))
    props = properties or {}
    if len(keys) >= NO_TAGS or len(props) >= NO_TAGS:
        raise RecordError(f"too many keys ({len(keys)}) or properties ({len(props)})")
    parts: list[bytes | memoryview] = [
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
    return framed(parts)


def framed(parts: Sequence[bytes | memoryview]) -> bytes:
    """The record whose bytes after its CRC32C field are ``parts``: behind its
    head (total size, magic, the parts' CRC32C)."""
    crc = 0
    for part in parts:
        crc = crc32c(part, crc)
    return b"".join([_HEAD.pack(_HEAD.size + sum(map(len, parts)), MAGIC, crc), *parts])


def encode_bare_records(bodies: Sequence[bytes], first_offset: int,
                        stamps: Sequence[int]) -> tuple[bytes, list[int]]:
    """The records of ``bodies`` alone (no keys, tags or properties), numbered
    from ``first_offset``, the k-th stamped ``stamps[k]``: joined, and the size
    of each. The bytes :func:`encode_record` makes of each, made with C
    iterators (no Python code per record): ``append_batch``'s common batch."""
    n = len(bodies)
    lengths = list(map(len, bodies))
    fields = list(map(_PLAIN_FIELDS.pack, range(first_offset, first_offset + n), stamps,
                      repeat(0, n), repeat(NO_TAGS, n), repeat(0, n), repeat(0, n), lengths))
    sizes = list(map(add, lengths, repeat(_HEAD.size + _PLAIN_FIELDS.size, n)))
    heads = map(_HEAD.pack, sizes, repeat(MAGIC, n), map(crc32c, bodies, map(crc32c, fields)))
    return b"".join(chain.from_iterable(zip(heads, fields, bodies, strict=True))), sizes


def record_size(head: bytes | memoryview) -> int:
    """The total size a record announces in its first 12 bytes (checked for sanity)."""
    if len(head) < _HEAD.size:
        raise RecordError(f"record head is {len(head)} bytes, need {_HEAD.size}")
    total, magic, _ = _HEAD.unpack_from(head)
    if magic != MAGIC or total < MIN_RECORD_SIZE:
        raise RecordError(f"no record here: magic {magic:#x}, size {total}")
    return int(total)


def _checked_prefix(view: memoryview) -> tuple[int, int, int, int, int, int, int]:
    """The fixed fields of the record occupying all of ``view`` (size, magic, CRC,
    offset, store time, flags, tags length), its size, magic and CRC32C checked."""
    size = len(view)
    if size < MIN_RECORD_SIZE:
        raise RecordError(f"record is {size} bytes, a record is at least {MIN_RECORD_SIZE}")
    fields = _PREFIX.unpack_from(view)
    total, magic, crc = fields[:3]
    if magic != MAGIC or total < MIN_RECORD_SIZE:
        raise RecordError(f"no record here: magic {magic:#x}, size {total}")
    if total != size:
        raise RecordError(f"record says {total} bytes, {size} given")
    if crc32c(view[_HEAD.size :]) != crc:
        raise RecordError("record fails its CRC32C")
    return fields


def record_head(data: bytes | memoryview) -> tuple[int, int]:
    """The offset and store time of the record occupying all of ``data``, its
    CRC32C checked (what a compressed or encrypted record shows without its key)."""
    fields = _checked_prefix(data if isinstance(data, memoryview) else memoryview(data))
    return fields[3], fields[4]


def decode_record(data: bytes | memoryview, topic: str, queue_id: int,
                  codec: RecordOpener | None = None) -> Message:
    """Parse and check one record occupying all of ``data``: one pass, one CRC
    (and, for a compressed or encrypted record, ``codec`` opens its tail)."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    total, _, _, queue_offset, store_ts, flags, tag_len = _checked_prefix(view)
    if flags:
        return _decode_sealed(view, flags, codec, Message(topic, queue_id, queue_offset, b"",
                                                          store_ts))
    pos = _PREFIX.size
    if tag_len == NO_TAGS and total - pos >= _BARE.size:
        keys_n, props_n, body_n = _BARE.unpack_from(view, pos)
        if not keys_n and not props_n and pos + _BARE.size + body_n == total:
            # The common record: a body and nothing else.
            return Message(topic, queue_id, queue_offset, view[pos + _BARE.size :].tobytes(),
                           store_ts, (), None, {})
    head = Message(topic, queue_id, queue_offset, b"", store_ts)
    try:
        return _parse_fields(view, head)
    except RecordError:
        tail = _unshrunk_tail(view)
        if tail is None:
            raise
        return _parse_fields(tail, head, start=0)


def _unshrunk_tail(view: memoryview) -> memoryview | None:
    """The tail of a record an older store sealed with flags 0 (zstd did
    not shrink it, no encryption): ``plain_len u32 | plain_crc32c u32 | tail``
    after the fixed fields (docs/records.md, *Commit-log record*). None unless
    both match: then it is such a record, and its tail is the plain one's."""
    if len(view) < TAIL_AT + _PLAIN_TAIL.size:
        return None
    plain_len, plain_crc = _PLAIN_TAIL.unpack_from(view, TAIL_AT)
    tail = view[TAIL_AT + _PLAIN_TAIL.size :]
    if len(tail) != plain_len or crc32c(tail) != plain_crc:
        return None
    return tail


def _parse_fields(view: memoryview, head: Message, start: int = TAIL_AT) -> Message:
    """``head`` with the tags, keys, properties and body that ``view`` holds from
    ``start`` to its end (a plain record, or a sealed one's opened tail)."""
    total = len(view)
    (tag_len,) = _U16.unpack_from(view, start)
    pos = start + 2
    try:
        tags: str | None = None
        if tag_len != NO_TAGS:
            tags = str(view[pos : pos + tag_len], "utf-8")
            pos += tag_len
        (count,) = _U16.unpack_from(view, pos)
        pos += 2
        keys: tuple[str, ...] = ()
        if count:
            found: list[str] = []
            for _ in range(count):
                (n,) = _U16.unpack_from(view, pos)
                found.append(str(view[pos + 2 : pos + 2 + n], "utf-8"))
                pos += 2 + n
            keys = tuple(found)
        (count,) = _U16.unpack_from(view, pos)
        pos += 2
        props: dict[str, str] = {}
        for _ in range(count):
            (n,) = _U16.unpack_from(view, pos)
            name = str(view[pos + 2 : pos + 2 + n], "utf-8")
            pos += 2 + n
            (n,) = _U32.unpack_from(view, pos)
            props[name] = str(view[pos + 4 : pos + 4 + n], "utf-8")
            pos += 4 + n
        (n,) = _U32.unpack_from(view, pos)
        body = view[pos + 4 : pos + 4 + n].tobytes()
        pos += 4 + n
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordError(f"record fields are malformed: {exc}") from None
    if pos != total:
        raise RecordError(f"record fields end at {pos}, record at {total}")
    return head._replace(body=body, keys=keys, tags=tags, properties=props)


def _decode_sealed(view: memoryview, flags: int, codec: RecordOpener | None,
                   head: Message) -> Message:
    """A compressed or encrypted record: its tail opened, then parsed."""
    if flags & ~KNOWN_FLAGS:
        raise RecordError(f"record has unknown flags {flags:#x}")
    if codec is None:
        raise RecordError("record is compressed or encrypted: read it with the store's "
                          "compression and encryption settings (and key)")
    # Parsed as the plain record's tail (its CRC32C checked by the codec).
    return _parse_fields(codec.open(view, flags), head, start=0)


def plain_run(view: memoryview, units: Sequence[CqUnit], start: int, stop: int, *,
              first_offset: int, room: int, first: bool) -> list[int]:
    """Where each record of ``units[start:stop]``, laid end to end in ``view``
    from byte 0, begins, while each is the common kind (a body, no tags, keys
    or properties) and agrees with its unit: the size, offset ``first_offset +
    k``, the store time, a zero tags hash, its CRC32C; and while they fit in
    ``room`` bytes (``first``: the first whatever its size). One more item:
    where the last of them ends (so ``[0]`` alone: none of them).

    One unpack and one CRC32C per record, nothing built (a loop that only
    compares is faster here than C iterators that build tuples to compare).
    The caller decodes the record it stopped before with
    :func:`decode_record`, which names what is wrong if anything is.
    """
    unpack = _PLAIN.unpack_from
    head, body_at = _HEAD.size, _PLAIN.size
    starts = [0]
    append = starts.append
    at = 0
    for k in range(start, stop):
        _, size, tags, store_ts = units[k]
        if size < body_at or tags or (at + size > room and (at or not first)):
            break
        length, magic, crc, offset, ts, flags, tag_len, keys_n, props_n, body_n = \
            unpack(view, at)
        end = at + size
        if (length != size or magic != MAGIC or flags or tag_len != NO_TAGS or keys_n or props_n
                or body_at + body_n != size or offset != first_offset + k or ts != store_ts
                or crc32c(view[at + head : end]) != crc):
            break
        append(end)
        at = end
    return starts


def plain_bodies(view: memoryview, starts: Sequence[int]) -> Iterator[memoryview]:
    """Views of the bodies of the records :func:`plain_run` checked, at ``starts``
    in ``view`` (no copy, no Python code per record)."""
    return map(view.__getitem__, map(slice, map(PLAIN_BODY_AT.__add__, starts),
                                     islice(starts, 1, None)))


def store_times(units: Sequence[CqUnit], start: int, n: int) -> Iterator[int]:
    """The store times of ``units[start:start + n]``."""
    return map(_STAMP, islice(units, start, start + n))


def plain_messages(view: memoryview, starts: Sequence[int], units: Sequence[CqUnit],
                   start: int, *, first_offset: int, topic: str, queue_id: int
                   ) -> list[Message]:
    """The messages of the records :func:`plain_run` checked: at ``starts``
    in ``view``, of ``units[start:]``. One body copy each, no Python code per
    message (each ``Message`` a tuple built in C)."""
    n = len(starts) - 1
    first = first_offset + start
    bodies = map(memoryview.tobytes, plain_bodies(view, starts))
    rows = zip(repeat(topic, n), repeat(queue_id, n), range(first, first + n), bodies,
               store_times(units, start, n), repeat((), n), repeat(None, n),
               repeat(NO_PROPERTIES, n), strict=True)
    return list(map(tuple.__new__, repeat(Message, n), rows))


def decode_plain_run(view: memoryview, units: Sequence[CqUnit], start: int, stop: int, *,
                     first_offset: int, topic: str, queue_id: int, out: list[Message],
                     total: int, max_bytes: int) -> tuple[int, int, int]:
    """Decode the records of ``units[start:stop]``, laid end to end in ``view``
    from byte 0, into ``out``, while each is the common kind and agrees with
    its unit (:func:`plain_run`).

    Stops before a record that is not such a one (the caller decodes it with
    :func:`decode_record`, which names what is wrong) and before one that
    would take ``total`` past ``max_bytes`` once ``out`` holds a message.
    Returns the index it stopped at, the bytes of ``view`` it used and the new
    total. One unpack, one CRC32C and one body copy per record.
    """
    starts = plain_run(view, units, start, stop, first_offset=first_offset,
                       room=max_bytes - total, first=not out)
    out += plain_messages(view, starts, units, start, first_offset=first_offset, topic=topic,
                          queue_id=queue_id)
    return start + len(starts) - 1, starts[-1], total + starts[-1]


class CqUnit(NamedTuple):
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


def encode_units(units: Iterable[CqUnit]) -> bytes:
    """:func:`encode_unit` of each, joined (with C iterators)."""
    bodies = list(starmap(_UNIT.pack, units))
    crcs = map(_UNIT_CRC.pack, map(crc32c, bodies))
    return b"".join(chain.from_iterable(zip(bodies, crcs, strict=True)))


def decode_unit(data: bytes | memoryview, offset: int = 0) -> CqUnit:
    """The unit at ``data[offset:offset+32]``, its CRC checked."""
    if len(data) - offset < UNIT_SIZE:
        raise RecordError(f"consume-queue unit is {max(0, len(data) - offset)} bytes, "
                          f"need {UNIT_SIZE}")
    position, size, tag_hash, ts, crc = _UNIT_ALL.unpack_from(data, offset)
    if crc32c(memoryview(data)[offset : offset + _UNIT_BODY]) != crc:
        raise RecordError("consume-queue unit fails its CRC32C")
    return CqUnit(position, size, tag_hash, ts)


def decode_units(data: bytes | memoryview, *, chained: bool = False,
                 previous_end: int | None = None) -> list[CqUnit]:
    """Every unit of ``data`` (whole units), each one's CRC checked; a bad one
    raises naming its index.

    ``chained``: for a reader that checks each unit against the record it
    points to, as ``get`` does. A unit that starts where the one before it
    (``previous_end`` for the first) ends has nothing its record does not
    confirm: its size, offset, store time and tags hash are compared with the
    record's CRC-checked fields, its position by following on. Only the others
    have their own CRC32C checked."""
    if len(data) % UNIT_SIZE:
        raise RecordError(f"consume-queue bytes are {len(data)}, not whole units")
    view = memoryview(data)
    out: list[CqUnit] = []
    append, new = out.append, tuple.__new__
    at = 0
    end = -1 if previous_end is None else previous_end  # positions are never negative
    for position, size, tag_hash, ts, crc in _UNIT_ALL.iter_unpack(view):
        if position != end and crc32c(view[at : at + _UNIT_BODY]) != crc:
            raise RecordError(f"consume-queue unit {at // UNIT_SIZE} of the read fails its "
                              "CRC32C")
        append(new(CqUnit, (position, size, tag_hash, ts)))  # CqUnit(...), built in C
        if chained:
            end = position + size
        at += UNIT_SIZE
    return out
