"""The PIP-17 index object of an offloaded ledger. Pure: no IO.

Layout, big-endian, as Pulsar's ``OffloadIndexBlockImpl.toStream`` writes it::

    magic 0xDE47DE47        int32
    index_len               int32   the whole index object, this header included
    data_object_len         int64   sum of the block sizes
    data_header_len         int64   128
    index_entry_count       int32   one entry per data block
    segment_metadata_len    int32
    segment_metadata        BookKeeper LedgerMetadataFormat, protobuf
    per block: first_entry_id int64, part_id int32 (from 1), offset int64

``offset`` is the block's byte offset in the data object (the sum of the sizes
of the blocks before it); ``part_id`` is its multipart part number. Pulsar reads
``index_len`` and ignores it; we check it.

Our writer appends a checksum trailer after those ``index_len`` bytes, which
Pulsar's reader never reaches (it reads ``index_entry_count`` entries and
stops)::

    magic 0x54534B31 ("TSK1")  int32
    block_count             int32   = index_entry_count
    per block: crc32c       int32   of the whole block as stored, header included
    crc32c                  int32   of every byte of the object before it

so a reader detects a block or an index changed in transit or at rest (PIP-17
has no checksum of its own). An index without the trailer (Pulsar's own) is
read unchecked.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from tieredstore.checksum import crc32c
from tieredstore.ledger.block import BlockPlan
from tieredstore.ledger.format import (
    HEADER_SIZE,
    INDEX_MAGIC,
    INT32_MAX,
    INT64_MAX,
    BytesLike,
    EntryOutOfRange,
    LedgerFormatError,
    check_int,
)
from tieredstore.ledger.ledger_metadata_pb2 import LedgerMetadataFormat

_INDEX_HEADER = struct.Struct(">IiqqiI")
_INDEX_ENTRY = struct.Struct(">qiq")
_TRAILER_HEADER = struct.Struct(">Ii")
_CRC = struct.Struct(">I")
TRAILER_MAGIC = 0x54534B31  # "TSK1"
INDEX_HEADER_SIZE = _INDEX_HEADER.size  # 32
INDEX_ENTRY_SIZE = _INDEX_ENTRY.size  # 20


def parse_ledger_metadata(data: BytesLike) -> LedgerMetadataFormat:
    """Parse BookKeeper ledger metadata; all its required fields must be there."""
    msg = LedgerMetadataFormat()
    try:
        msg.ParseFromString(bytes(data))
    except DecodeError as exc:
        raise LedgerFormatError(f"ledger metadata is not valid protobuf: {exc}") from None
    if not msg.IsInitialized():  # ParseFromString (upb) does not check required fields
        missing: list[str] = msg.FindInitializationErrors()  # type: ignore[attr-defined]
        raise LedgerFormatError(f"ledger metadata lacks required fields: {', '.join(missing)}")
    return msg


@dataclass(frozen=True, slots=True)
class IndexEntry:
    first_entry_id: int
    part_id: int
    offset: int
    """Offset of the block (its header) in the data object."""

    @property
    def data_offset(self) -> int:
        """Offset of the block's first entry in the data object (Pulsar's ``getDataOffset``)."""
        return self.offset + HEADER_SIZE


@dataclass(frozen=True, slots=True)
class OffloadIndex:
    """The index of one offloaded ledger: where each data block starts."""

    data_object_len: int
    data_header_len: int
    ledger_metadata: bytes
    """BookKeeper ``LedgerMetadataFormat`` bytes, stored as they are."""
    entries: Sequence[IndexEntry]
    block_crcs: Sequence[int] = ()
    """CRC32C of each block as stored, from the checksum trailer; empty when
    the index has none (written by Pulsar)."""
    last_entry_id: int = field(init=False, repr=False, compare=False)
    """From the ledger metadata: lookups past it are refused."""
    _first_ids: list[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ledger_metadata", bytes(self.ledger_metadata))
        object.__setattr__(self, "entries", tuple(self.entries))
        check_int("index data_object_len", self.data_object_len, 0, INT64_MAX)
        if self.data_header_len != HEADER_SIZE:
            raise LedgerFormatError(
                f"index data_header_len is {self.data_header_len}, expected {HEADER_SIZE}"
            )
        object.__setattr__(self, "block_crcs", tuple(self.block_crcs))
        if not self.entries:
            raise LedgerFormatError("an offload index needs at least one block")
        if self.block_crcs and len(self.block_crcs) != len(self.entries):
            raise LedgerFormatError(f"the checksum trailer holds {len(self.block_crcs)} block "
                                    f"checksums for {len(self.entries)} blocks")
        prev: IndexEntry | None = None
        for i, e in enumerate(self.entries):
            check_int("index first_entry_id", e.first_entry_id, 0, INT64_MAX)
            check_int("index offset", e.offset, 0, INT64_MAX)
            if e.part_id != i + 1:
                raise LedgerFormatError(
                    f"index entry {i} has part id {e.part_id}, expected {i + 1}"
                )
            if prev is None and e.offset != 0:
                raise LedgerFormatError(f"the first block is at offset {e.offset}, expected 0")
            if prev is not None and (
                e.first_entry_id <= prev.first_entry_id or e.offset <= prev.offset
            ):
                raise LedgerFormatError(
                    f"index entry {i} ({e}) does not follow index entry {i - 1} ({prev})"
                )
            prev = e
        assert prev is not None
        if prev.offset >= self.data_object_len:
            raise LedgerFormatError(
                f"the last block starts at {prev.offset}, past the data object "
                f"length {self.data_object_len}"
            )
        meta = parse_ledger_metadata(self.ledger_metadata)
        if not meta.HasField("lastEntryId"):
            raise LedgerFormatError("ledger metadata has no lastEntryId")
        if meta.lastEntryId < prev.first_entry_id:
            raise LedgerFormatError(
                f"ledger metadata lastEntryId {meta.lastEntryId} is before the first entry "
                f"{prev.first_entry_id} of the last block"
            )
        object.__setattr__(self, "last_entry_id", meta.lastEntryId)
        object.__setattr__(self, "_first_ids", [e.first_entry_id for e in self.entries])

    @classmethod
    def for_blocks(cls, blocks: Iterable[BlockPlan], ledger_metadata: bytes) -> OffloadIndex:
        """The index of a data object made of ``blocks``, in order, parts 1, 2, ..."""
        entries = []
        crcs: list[int | None] = []
        offset = 0
        for part_id, block in enumerate(blocks, 1):
            entries.append(IndexEntry(block.first_entry_id, part_id, offset))
            crcs.append(block.crc)
            offset += block.block_len
        kept = [c for c in crcs if c is not None]
        return cls(offset, HEADER_SIZE, ledger_metadata, entries,
                   kept if len(kept) == len(crcs) else ())

    def block_crc(self, entry: IndexEntry) -> int | None:
        """The stored CRC32C of the block ``entry`` points to, if the index has them."""
        return self.block_crcs[entry.part_id - 1] if self.block_crcs else None

    @property
    def metadata(self) -> LedgerMetadataFormat:
        """The ledger metadata, parsed (a new message each call)."""
        return parse_ledger_metadata(self.ledger_metadata)

    def lookup(self, entry_id: int) -> IndexEntry:
        """The block holding ``entry_id``: the last one whose first entry id is <= it."""
        first = self._first_ids[0]
        if not first <= entry_id <= self.last_entry_id:
            raise EntryOutOfRange(
                f"entry {entry_id} is not in the offloaded ledger, "
                f"which holds entries {first} to {self.last_entry_id}"
            )
        return self.entries[bisect.bisect_right(self._first_ids, entry_id) - 1]

    def block_len(self, entry: IndexEntry) -> int:
        """The size of the block ``entry`` points to: up to the next block or the end."""
        i = entry.part_id - 1
        if not (0 <= i < len(self.entries) and self.entries[i] == entry):
            raise LedgerFormatError(f"{entry} is not an entry of this index")
        end = self.entries[i + 1].offset if i + 1 < len(self.entries) else self.data_object_len
        return end - entry.offset

    def encode(self) -> bytes:
        n = len(self.entries)
        index_len = INDEX_HEADER_SIZE + len(self.ledger_metadata) + n * INDEX_ENTRY_SIZE
        check_int("index length", index_len, 0, INT32_MAX)
        out = bytearray(index_len)
        _INDEX_HEADER.pack_into(
            out,
            0,
            INDEX_MAGIC,
            index_len,
            self.data_object_len,
            self.data_header_len,
            n,
            len(self.ledger_metadata),
        )
        pos = INDEX_HEADER_SIZE + len(self.ledger_metadata)
        out[INDEX_HEADER_SIZE:pos] = self.ledger_metadata
        for e in self.entries:
            _INDEX_ENTRY.pack_into(out, pos, e.first_entry_id, e.part_id, e.offset)
            pos += INDEX_ENTRY_SIZE
        if self.block_crcs:
            out += _TRAILER_HEADER.pack(TRAILER_MAGIC, n)
            out += b"".join(_CRC.pack(c) for c in self.block_crcs)
            out += _CRC.pack(crc32c(out))
        return bytes(out)

    @classmethod
    def decode(cls, data: BytesLike) -> OffloadIndex:
        view = memoryview(data).cast("B")
        if len(view) < INDEX_HEADER_SIZE:
            raise LedgerFormatError(
                f"index object needs at least {INDEX_HEADER_SIZE} bytes, got {len(view)}"
            )
        magic, index_len, object_len, header_len, count, meta_len = _INDEX_HEADER.unpack_from(
            view, 0
        )
        if magic != INDEX_MAGIC:
            raise LedgerFormatError(
                f"not an offload index: magic is 0x{magic:08X}, expected 0x{INDEX_MAGIC:08X}"
            )
        if count < 0:
            raise LedgerFormatError(f"index entry count is negative: {count}")
        expected = INDEX_HEADER_SIZE + meta_len + count * INDEX_ENTRY_SIZE
        with_trailer = expected + _TRAILER_HEADER.size + (count + 1) * _CRC.size
        if index_len != expected or len(view) not in (expected, with_trailer):
            raise LedgerFormatError(
                f"index of {count} entries and {meta_len} metadata bytes is {expected} bytes "
                f"({with_trailer} with its checksum trailer), but its header says {index_len} "
                f"and the object has {len(view)}"
            )
        crcs: list[int] = []
        if len(view) == with_trailer:
            trailer_magic, trailer_count = _TRAILER_HEADER.unpack_from(view, expected)
            stored = _CRC.unpack_from(view, with_trailer - _CRC.size)[0]
            if trailer_magic != TRAILER_MAGIC or trailer_count != count:
                raise LedgerFormatError(f"the index's checksum trailer is not one: magic "
                                        f"0x{trailer_magic:08X}, {trailer_count} blocks")
            if crc32c(view[:with_trailer - _CRC.size]) != stored:
                raise LedgerFormatError("the index fails its CRC32C (changed in transit or "
                                        "at rest)")
            start = expected + _TRAILER_HEADER.size
            crcs = [_CRC.unpack_from(view, start + i * _CRC.size)[0] for i in range(count)]
        pos = INDEX_HEADER_SIZE + meta_len
        metadata = bytes(view[INDEX_HEADER_SIZE:pos])
        entries = [
            IndexEntry(*_INDEX_ENTRY.unpack_from(view, pos + i * INDEX_ENTRY_SIZE))
            for i in range(count)
        ]
        return cls(object_len, header_len, metadata, entries, crcs)
