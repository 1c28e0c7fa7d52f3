"""PIP-17 formats shared by the data and index objects: constants, errors, the
data block header and the object names. Pure: no IO.

Pulsar's tiered storage (``tiered-storage/jcloud``) stores an offloaded ledger
as two objects, ``{uuid}-ledger-{ledgerId}`` (the data, a multipart upload whose
parts are the data blocks, see :mod:`tieredstore.ledger.block`) and
``{uuid}-ledger-{ledgerId}-index`` (see :mod:`tieredstore.ledger.index`). Every
integer is big-endian, as Java's ``DataOutput`` writes it.

Data block header, 128 bytes (Pulsar ``DataBlockHeaderImpl``)::

    magic 0xFBDBABCB  int32
    header_len        int64   always 128
    block_len         int64   the whole block, header included
    first_entry_id    int64
    zeros             to byte 128
"""

from __future__ import annotations

import re
import struct
import uuid as uuid_mod
from dataclasses import dataclass
from typing import Final, TypeAlias

from tieredstore.errors import TieredStoreError
from tieredstore.sizes import MiB

BytesLike: TypeAlias = bytes | bytearray | memoryview

DATA_BLOCK_MAGIC: Final = 0xFBDBABCB
INDEX_MAGIC: Final = 0xDE47DE47
HEADER_SIZE: Final = 128
"""Length of a data block header; entries start at this offset in every block."""
ENTRY_HEADER_SIZE: Final = 12
"""``[len int32][entry_id int64]`` in front of every entry's payload."""
PADDING_PATTERN: Final = bytes.fromhex("FEDCDEAD")

DEFAULT_BLOCK_SIZE: Final = 64 * MiB
"""Pulsar's default ``maxBlockSizeInBytes``."""
MIN_BLOCK_SIZE: Final = 5 * MiB
"""Blocks become multipart parts: every part but the last is at least 5 MiB."""
MAX_BLOCK_SIZE: Final = 2**31 - 1
"""Pulsar holds a block size in a Java ``int``."""
MIN_POSSIBLE_BLOCK_SIZE: Final = HEADER_SIZE + ENTRY_HEADER_SIZE
"""The smallest block that holds an entry at all (one empty entry)."""

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1

_HEADER = struct.Struct(">Iqqq")
_HEADER_ZEROS: Final = bytes(HEADER_SIZE - _HEADER.size)


class LedgerFormatError(TieredStoreError, ValueError):
    """Bytes are not a valid PIP-17 object, or values cannot be encoded as one."""


class EntryTooLarge(LedgerFormatError):
    """An entry cannot fit even an empty block of the chosen size."""

    def __init__(self, entry_id: int, payload_len: int, block_size: int) -> None:
        need = HEADER_SIZE + ENTRY_HEADER_SIZE + payload_len
        super().__init__(
            f"entry {entry_id}: {payload_len} payload bytes need a block of at least {need} "
            f"bytes (128 header + 12 entry header + payload), but the block size is "
            f"{block_size}"
        )
        self.entry_id = entry_id
        self.payload_len = payload_len
        self.block_size = block_size


class EntryOutOfRange(TieredStoreError, IndexError):
    """An entry id outside the offloaded ledger was looked up."""


def check_int(name: str, value: int, low: int, high: int) -> None:
    """Raise :class:`LedgerFormatError` unless ``low <= value <= high``."""
    if not low <= value <= high:
        raise LedgerFormatError(f"{name} {value} is out of range [{low}, {high}]")


def padding(length: int) -> bytes:
    """``length`` bytes of the cycle ``FE DC DE AD``, starting at ``FE``.

    Pulsar restarts the cycle at the first padding byte, whatever its offset in
    the block: ``BlockAwareSegmentInputStreamImpl`` indexes the pattern with
    ``(bytesReadOffset - dataBlockFullOffset) % 4``, where ``dataBlockFullOffset``
    is the offset of the first padding byte. It is not aligned to the block.
    """
    if length <= 0:
        return b""
    reps = -(-length // len(PADDING_PATTERN))
    return (PADDING_PATTERN * reps)[:length]


@dataclass(frozen=True, slots=True)
class DataBlockHeader:
    """The 128-byte header at the start of every data block."""

    block_len: int
    first_entry_id: int
    header_len: int = HEADER_SIZE

    def __post_init__(self) -> None:
        if self.header_len != HEADER_SIZE:
            raise LedgerFormatError(
                f"data block header_len is {self.header_len}, expected {HEADER_SIZE}"
            )
        check_int("data block block_len", self.block_len, HEADER_SIZE, INT64_MAX)
        check_int("data block first_entry_id", self.first_entry_id, 0, INT64_MAX)

    def encode(self) -> bytes:
        return (
            _HEADER.pack(DATA_BLOCK_MAGIC, self.header_len, self.block_len, self.first_entry_id)
            + _HEADER_ZEROS
        )

    @classmethod
    def decode(cls, data: BytesLike) -> DataBlockHeader:
        """Read the header from the first 128 bytes of ``data`` (a block or its prefix)."""
        view = memoryview(data).cast("B")
        if len(view) < HEADER_SIZE:
            raise LedgerFormatError(
                f"data block header needs {HEADER_SIZE} bytes, got only {len(view)}"
            )
        magic, header_len, block_len, first_entry_id = _HEADER.unpack_from(view, 0)
        if magic != DATA_BLOCK_MAGIC:
            raise LedgerFormatError(
                f"not a data block: magic is 0x{magic:08X}, expected 0x{DATA_BLOCK_MAGIC:08X}"
            )
        return cls(block_len=block_len, first_entry_id=first_entry_id, header_len=header_len)


# --- object names (Pulsar DataBlockUtils) ------------------------------------

_NAME_RE = re.compile(
    r"(?P<uuid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"-ledger-(?P<ledger>0|[1-9][0-9]{0,18})(?P<index>-index)?"
)


def as_uuid(uuid: uuid_mod.UUID | str) -> uuid_mod.UUID:
    """``uuid`` as a UUID; anything else is :class:`LedgerFormatError`."""
    try:
        return uuid if isinstance(uuid, uuid_mod.UUID) else uuid_mod.UUID(uuid)
    except (ValueError, TypeError, AttributeError):
        raise LedgerFormatError(f"not a UUID: {uuid!r}") from None


def data_object_name(ledger_id: int, uuid: uuid_mod.UUID | str) -> str:
    """``{uuid}-ledger-{ledgerId}``, the name of a ledger's data object."""
    check_int("ledger id", ledger_id, 0, INT64_MAX)
    # Java's UUID.toString(): 36 lowercase characters, as Python's str(UUID).
    return f"{as_uuid(uuid)}-ledger-{ledger_id}"


def index_object_name(ledger_id: int, uuid: uuid_mod.UUID | str) -> str:
    """``{uuid}-ledger-{ledgerId}-index``, the name of a ledger's index object."""
    return data_object_name(ledger_id, uuid) + "-index"


@dataclass(frozen=True, slots=True)
class ObjectName:
    uuid: uuid_mod.UUID
    ledger_id: int
    is_index: bool


def parse_object_name(name: str) -> ObjectName:
    """Split a name made by :func:`data_object_name` or :func:`index_object_name`."""
    m = _NAME_RE.fullmatch(name)
    if m is None or int(m["ledger"]) > INT64_MAX:
        raise LedgerFormatError(
            f"not an offloaded ledger object name: {name!r} "
            "(expected '{uuid}-ledger-{ledgerId}' or '{uuid}-ledger-{ledgerId}-index')"
        )
    return ObjectName(uuid_mod.UUID(m["uuid"]), int(m["ledger"]), m["index"] is not None)
