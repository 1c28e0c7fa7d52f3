"""The local ledger store's files: entry records and the metadata file. Pure: no IO.

An entry record is BookKeeper's entry as a bookie stores it with the CRC32C
digest type (seed 004: ledger id, entry id, last add confirmed, digest),
big-endian::

    ledger_id            int64
    entry_id             int64
    last_add_confirmed   int64   the LAC the writer knew when it sent the entry
                                 (for a batch: the LAC before the batch)
    length               int64   payload bytes
    digest               uint32  CRC32C of the 32 bytes above, then of the payload
    payload              length bytes

A ledger's log file is its records back to back, entry 0 first. The metadata
file is BookKeeper's ``LedgerMetadataFormat`` protobuf in the framing of the
metadata store's heads (:func:`tieredstore.metadata.format.frame`): ``"TLM1"``,
the CRC32C of the payload (uint32), then the payload.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from tieredstore.checksum import crc32c
from tieredstore.errors import TieredStoreError
from tieredstore.ledger.format import BytesLike
from tieredstore.ledger.handle import LedgerMetadata
from tieredstore.metadata.format import frame, unframe

_HEADER = struct.Struct(">qqqq")
_DIGEST = struct.Struct(">I")
RECORD_HEADER_SIZE: Final = _HEADER.size + _DIGEST.size  # 36
MAX_ENTRY_SIZE: Final = 2**31 - 1
META_MAGIC: Final = b"TLM1"


class EntryLogError(TieredStoreError, ValueError):
    """Bytes are not a valid record; the caller turns this into a ledger error."""


@dataclass(frozen=True, slots=True)
class RecordHeader:
    ledger_id: int
    entry_id: int
    last_add_confirmed: int
    length: int
    digest: int

    @property
    def record_size(self) -> int:
        return RECORD_HEADER_SIZE + self.length


def encode_record(ledger_id: int, entry_id: int, lac: int, payload: BytesLike) -> list[BytesLike]:
    """The record as buffers to write in order (the payload is not copied)."""
    n = memoryview(payload).nbytes
    if n > MAX_ENTRY_SIZE:
        raise EntryLogError(f"ledger {ledger_id}: entry {entry_id}: {n} bytes, "
                            f"more than {MAX_ENTRY_SIZE}")
    head = _HEADER.pack(ledger_id, entry_id, lac, n)
    digest = crc32c(payload, crc32c(head))
    return [head + _DIGEST.pack(digest), payload]


def decode_header(data: BytesLike) -> RecordHeader:
    """The first 36 bytes of a record."""
    view = memoryview(data).cast("B")
    if len(view) < RECORD_HEADER_SIZE:
        raise EntryLogError(f"record header needs {RECORD_HEADER_SIZE} bytes, got {len(view)}")
    ledger_id, entry_id, lac, length = _HEADER.unpack_from(view, 0)
    (digest,) = _DIGEST.unpack_from(view, _HEADER.size)
    if length < 0 or length > MAX_ENTRY_SIZE:
        raise EntryLogError(f"record of entry {entry_id} has length {length}")
    return RecordHeader(ledger_id, entry_id, lac, length, digest)


def check_record(data: BytesLike, ledger_id: int, entry_id: int) -> memoryview:
    """Check a whole record (header and payload) and return its payload.

    Raises :class:`EntryLogError` naming what differs: the ledger or entry id in
    the header, the length, or the digest.
    """
    view = memoryview(data).cast("B")
    header = decode_header(view)
    if (header.ledger_id, header.entry_id) != (ledger_id, entry_id):
        raise EntryLogError(
            f"record holds ledger {header.ledger_id} entry {header.entry_id}, "
            f"expected ledger {ledger_id} entry {entry_id}"
        )
    if len(view) != header.record_size:
        raise EntryLogError(
            f"entry {entry_id}: record is {len(view)} bytes, its header says "
            f"{header.record_size}"
        )
    actual = crc32c(view[RECORD_HEADER_SIZE:], crc32c(view[: _HEADER.size]))
    if actual != header.digest:
        raise EntryLogError(
            f"entry {entry_id}: CRC32C digest {actual:08x} does not match the stored "
            f"{header.digest:08x}"
        )
    return view[RECORD_HEADER_SIZE:]


def encode_metadata(metadata: LedgerMetadata) -> bytes:
    return frame(META_MAGIC, metadata.to_bytes())


def decode_metadata(data: bytes, key: str) -> LedgerMetadata:
    """The metadata read from file ``key``; a bad frame is ``CorruptMetadata``."""
    return LedgerMetadata.from_bytes(unframe(META_MAGIC, data, key))
