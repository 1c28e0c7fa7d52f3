"""The key index's bytes: entries of the ``index`` flat file, and slot objects.

See docs/records.md, *Key index*. An entry says where one key of one message
is; a *watermark* (``key_hash`` 0) says every message up to its offset has
its entries before it. A sealed index segment gets a slot object: its
entries grouped by ``key_hash mod slot_count``, behind a directory that
says where each slot's items start and their CRC32C, so that a lookup reads
two small ranges instead of the segment.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from tieredstore.checksum import crc32c
from tieredstore.errors import IntegrityError

if TYPE_CHECKING:
    from tieredstore.store.formats.record import Message

_ENTRY = struct.Struct(">IQqQI")
# 32 bytes, as a consume-queue unit: chunk boundaries (multiples of 1 KiB from the
# segment's start) never cut an entry, so a crash between two chunks leaves none half
# written.
ENTRY_SIZE = _ENTRY.size
WATERMARK = 0  # the key_hash of a watermark entry
WATERMARK_GAP = 1024  # messages the last entry may trail a dispatch by

_HEADER = struct.Struct(">4sHHII")
HEADER_SIZE = _HEADER.size  # 16
_SLOT = struct.Struct(">II")
SLOT_SIZE = _SLOT.size  # 8
assert ENTRY_SIZE == 32
SLOTS_MAGIC = b"TSIX"
SLOTS_VERSION = 1
ENTRIES_PER_SLOT = 4


class KeyEntry(NamedTuple):
    """One key of one message (or a watermark), and where its record is."""

    key_hash: int
    offset: int
    store_timestamp: int
    position: int = 0  # of the record in the commit-log flat file
    size: int = 0  # of the record


UNIQUE_ID = "UNIQ_KEY"  # the property RocketMQ clients put a message's unique id in


def indexed_keys(keys: Sequence[str], properties: Mapping[str, str] | None) -> Sequence[str]:
    """What a message is indexed by: its keys, and its unique id if it has one."""
    unique = properties.get(UNIQUE_ID) if properties else None
    if not unique or unique in keys:
        return keys
    return (*keys, unique)


def has_key(message: Message, key: str) -> bool:
    """Whether ``message`` is indexed by ``key`` (see :func:`indexed_keys`)."""
    return key in message.keys or message.properties.get(UNIQUE_ID) == key


def key_hash(key: str) -> int:
    """The key's hash (CRC32C of its UTF-8), never :data:`WATERMARK`."""
    return crc32c(key.encode()) or 1


def encode_entry(entry: KeyEntry) -> bytes:
    return _ENTRY.pack(*entry)


def decode_entries(data: bytes | memoryview) -> Iterator[KeyEntry]:
    """The entries of whole-entry bytes (a trailing partial entry is an error)."""
    if len(data) % ENTRY_SIZE:
        raise IntegrityError(f"{len(data)} index bytes are not whole {ENTRY_SIZE}-byte entries")
    return (KeyEntry(*t) for t in _ENTRY.iter_unpack(data))


def slot_count(segment_size: int) -> int:
    """The slots of a sealed index segment of ``segment_size`` bytes: a power of
    two near one per :data:`ENTRIES_PER_SLOT` entries, known from its record."""
    wanted = max(1, segment_size // ENTRY_SIZE // ENTRIES_PER_SLOT)
    return 1 << (wanted - 1).bit_length()


def slot_of(hash_value: int, slots: int) -> int:
    return hash_value % slots


def build_slots(entries: Iterable[KeyEntry], segment_size: int) -> bytes:
    """The slot object of a sealed index segment of ``segment_size`` bytes."""
    slots = slot_count(segment_size)
    items = sorted((slot_of(e.key_hash, slots), e.offset, e) for e in entries
                   if e.key_hash != WATERMARK)
    by_slot: list[list[bytes]] = [[] for _ in range(slots)]
    for slot, _, entry in items:
        by_slot[slot].append(encode_entry(entry))
    directory = bytearray()
    first = 0
    for encoded in by_slot:
        directory += _SLOT.pack(first, crc32c(b"".join(encoded)))
        first += len(encoded)
    directory += _SLOT.pack(first, 0)
    header = _HEADER.pack(SLOTS_MAGIC, SLOTS_VERSION, 0, slots, len(items))
    return header + bytes(directory) + b"".join(b"".join(e) for e in by_slot)


def directory_range(slot: int) -> tuple[int, int]:
    """Where directory entries ``slot`` and ``slot + 1`` are: (start, length)."""
    return HEADER_SIZE + slot * SLOT_SIZE, 2 * SLOT_SIZE


def items_range(slots: int, first: int, end: int) -> tuple[int, int]:
    """Where items ``[first, end)`` of a slot object with ``slots`` slots are."""
    return HEADER_SIZE + (slots + 1) * SLOT_SIZE + first * ENTRY_SIZE, (end - first) * ENTRY_SIZE


def parse_directory(data: bytes) -> tuple[int, int, int]:
    """A slot's first item, its end and its CRC32C, from :func:`directory_range`'s bytes."""
    if len(data) != 2 * SLOT_SIZE:
        raise IntegrityError(f"slot directory read gave {len(data)} bytes, expected "
                             f"{2 * SLOT_SIZE}")
    first, crc = _SLOT.unpack_from(data, 0)
    end, _ = _SLOT.unpack_from(data, SLOT_SIZE)
    if end < first:
        raise IntegrityError(f"slot directory is damaged: items [{first}, {end})")
    return first, end, crc


def check_items(data: bytes, count: int, crc: int) -> list[KeyEntry]:
    """A slot's items, checked against the directory's count and CRC32C."""
    if len(data) != count * ENTRY_SIZE or crc32c(data) != crc:
        raise IntegrityError(f"slot items ({len(data)} bytes) do not match the slot "
                             f"directory ({count} items, crc32c 0x{crc:08x})")
    return list(decode_entries(data))
